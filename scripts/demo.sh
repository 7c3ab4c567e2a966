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
step() { printf '\n== %s\n' "$*"; }
step "make a 1 GiB UFS2 image (soft updates, check-hashes) and mount it"
$U newfs -s 1G "$img" | tail -3
$U mount "$img" "$mnt"
step "copy /usr/include into the mount"
t0=$(date +%s.%N)
cp -a /usr/include "$mnt/include"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN{printf "copied /usr/include in %.2f s\n", b-a}'
step "compare the copy with the original (symlinks compared as links)"
if ! diff -r --no-dereference /usr/include "$mnt/include" > "$work/diff.txt"; then
  echo "FAILED: the copy differs from /usr/include:" >&2
  head -20 "$work/diff.txt" >&2
  exit 1
fi
echo "contents identical ($(find "$mnt/include" | wc -l) entries)"
df -h "$mnt"
step "unmount and check the image"
$U umount "$mnt"
$U fsck -n "$img" | tail -2
$U dumpfs -s "$img" | head -8
if [ "${UFSKIT_DEMO_PAPER:-1}" != 0 ]; then
  step "the paper's evaluation, quick profile, on a modeled 2002 machine (about a minute)"
  $U bench paper --quick --out results/paper
  echo "report: $PWD/results/paper/report.html, findings: $PWD/results/paper/findings.md"
fi
