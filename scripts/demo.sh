#!/usr/bin/env bash
# The main job on a built-in default: make a UFS2 image, mount it through
# FUSE, copy /usr/include in, compare, unmount, check it, summarise it;
# then the paper's evaluation, quick profile (every workload under the 16
# combinations of soft updates, dirpref, vmiodir and dirhash on the modeled
# 2002 machine), with its report in results/paper/report.html and its
# verdicts counted. One line per step; long steps show a progress line on
# a terminal, and their full output goes to a log named on failure.
# UFSKIT_DEMO_PAPER=0 skips the evaluation.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
work=$(mktemp -d "${TMPDIR:-/tmp}/ufskit-demo.XXXXXX")
U=target/release/ufskit
img=$work/demo.img mnt=$work/mnt
mkdir -p "$mnt"
trap 'mountpoint -q "$mnt" && $U umount "$mnt"; rm -rf "$work"' EXIT

# quietly LABEL LOG CMD...: runs CMD with its output in LOG, showing
# "LABEL... N s" while it runs (on a terminal); on failure prints the log.
quietly() {
  local label=$1 log=$2
  shift 2
  "$@" > "$log" 2>&1 &
  local pid=$! s=0
  while kill -0 "$pid" 2>/dev/null; do
    [ -t 1 ] && printf '\r%s... %d s' "$label" "$s"
    sleep 1
    s=$((s + 1))
  done
  [ -t 1 ] && printf '\r\033[K'
  if ! wait "$pid"; then
    echo "FAILED: $label; its output:" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  echo "$label: done in $s s"
}

quietly "building ufskit (cargo build --release; minutes the first time)" \
  "$work/build.log" cargo build --release --workspace
$U newfs -s 1G "$img" > "$work/newfs.log"
$U mount "$img" "$mnt"
echo "made a 1 GiB UFS2 image and mounted it: $(head -1 "$work/newfs.log")"
t0=$(date +%s.%N)
cp -a /usr/include "$mnt/include"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" 'BEGIN{printf "copied /usr/include into the mount in %.2f s\n", b-a}'
if ! diff -r --no-dereference /usr/include "$mnt/include" > "$work/diff.txt"; then
  echo "FAILED: the copy differs from /usr/include:" >&2
  head -20 "$work/diff.txt" >&2
  exit 1
fi
echo "the copy is identical to /usr/include ($(find "$mnt/include" | wc -l) entries, symlinks compared as links)"
$U umount "$mnt"
fsck_out=$($U fsck -n "$img")
echo "unmounted; fsck: $(echo "$fsck_out" | tail -1 | tr 'A-Z' 'a-z'), $(echo "$fsck_out" | grep 'files,')"
# The superblock in words (ufskit dumpfs -s shows every field).
$U dumpfs -s "$img" | awk -F'\t' '
  $1 == "magic" { fmt = $2; sub(/^[0-9]+ \(/, "", fmt); sub(/\)$/, "", fmt) }
  $1 == "id" { ncg = $4; size = $6 }
  $1 == "bsize" { bsize = $2 }
  $1 == "fsize" { fsize = $2 }
  $1 == "nbfree" { nbfree = $2; nffree = $8 }
  $1 == "flags" { flags = $2 }
  END {
    features = ""
    if (flags ~ /soft-updates/) features = features ", soft updates"
    if (flags ~ /check-hashes/) features = features ", check-hashes"
    if (flags ~ /journal/) features = features ", journal"
    printf "the file system: %s, %.1f GiB in %d cylinder groups, %d KiB blocks, %d KiB fragments%s; %.0f MiB free\n",
      fmt, size * fsize / 2^30, ncg, bsize / 1024, fsize / 1024, features,
      (nbfree * bsize + nffree * fsize) / 2^20
  }'
if [ "${UFSKIT_DEMO_PAPER:-1}" != 0 ]; then
  quietly "the paper's evaluation, quick profile, on a modeled 2002 machine" \
    "$work/paper.log" $U bench paper --quick --out results/paper
  f=results/paper/findings.md
  # Each claim has a heading "### ID. VERDICT" in the findings.
  count() { grep -cE "^### [^ ]+\. $1\$" "$f" || true; }
  echo "the paper's claims, as measured: $(count agrees) agree, $(count partly) partly," \
    "$(count disagrees) disagree, $(count 'not measured') not measured"
  echo "report: $PWD/results/paper/report.html (findings: $PWD/$f)"
fi
