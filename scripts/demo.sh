#!/usr/bin/env bash
# The main job on a built-in default: make a UFS2 image, mount it through
# FUSE, copy /usr/include in, compare, unmount, check it, show its summary;
# then the paper's evaluation, quick profile (every workload under the 16
# combinations of soft updates, dirpref, vmiodir and dirhash on the modeled
# 2002 machine), with its report in results/paper/report.html.
# UFSKIT_DEMO_PAPER=0 skips the evaluation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
cargo build --release -q -p ufskit
U=target/release/ufskit
work=$(mktemp -d /tmp/ufskit-demo.XXXXXX)
img=$work/demo.img mnt=$work/mnt
mkdir -p "$mnt"
trap 'mountpoint -q "$mnt" && $U umount "$mnt"; rm -rf "$work"' EXIT
$U newfs -s 1G "$img"
$U mount "$img" "$mnt"
t0=$(date +%s.%N)
cp -a /usr/include "$mnt/include"
t1=$(date +%s.%N)
diff -r /usr/include "$mnt/include" && echo "contents identical"
awk -v a="$t0" -v b="$t1" 'BEGIN{printf "copied /usr/include in %.2f s\n", b-a}'
df -h "$mnt"
$U umount "$mnt"
$U fsck -n "$img"
$U dumpfs -s "$img" | head -20
if [ "${UFSKIT_DEMO_PAPER:-1}" != 0 ]; then
  $U bench paper --quick --out results/paper
  echo "report: $PWD/results/paper/report.html, findings: $PWD/results/paper/findings.md"
fi
