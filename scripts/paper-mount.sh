#!/usr/bin/env bash
# The paper's evaluation with real programs through the FUSE mount: under
# each of the 16 combinations of soft updates (softdep/normal), dirpref
# (orlov/traditional), vmiodir (on/off) and dirhash (2 MiB/off), on a fresh
# image each time: tar extract of a real tree, find -print, rm -rf;
# bonnie++'s small-file tests (-s 0 -n N: sequential and random create,
# stat, delete); postmark 1.5 with its default file sizes. Wall-clock
# seconds of this machine (not the modeled 2002 machine of
# `ufskit bench paper`), repeated RUNS times because they vary; the CSV then
# goes through analysis/paper_stats.py and analysis/paper_report.py.
#
# usage: scripts/paper-mount.sh [--quick] [--runs N] [--out DIR] [--tree DIR]  (as root)
#   --quick: the tree /usr/include/linux, bonnie++ -n 1 (1,024 files),
#   postmark 1,000 files and transactions, 1 run; default: /usr/include,
#   -n 16 (16,384 files, as the paper), postmark 10,000 files and
#   transactions, 3 runs.
# Every image is checked with `ufskit fsck -n` after its run; a finding
# stops the script (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 runs= out=results/paper-mount tree=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --runs) runs=$2; shift ;;
    --out) out=$2; shift ;;
    --tree) tree=$2; shift ;;
    *) echo "usage: $0 [--quick] [--runs N] [--out DIR] [--tree DIR]" >&2; exit 2 ;;
  esac
  shift
done
[ "$(id -u)" = 0 ] || { echo "paper-mount.sh must run as root (FUSE mounts for bonnie++ -u root)" >&2; exit 1; }
if [ $quick = 1 ]; then
  bn=1 pm=1000 runs=${runs:-1} tree=${tree:-/usr/include/linux}
else
  bn=16 pm=10000 runs=${runs:-3} tree=${tree:-/usr/include}
fi
scripts/deps.sh
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
BONNIE=$(command -v bonnie++ || echo /usr/sbin/bonnie++)
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/ufskit-paper-mount.XXXXXX)
cleanup() {
  mountpoint -q "$work/mnt" && $U umount "$work/mnt" || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/mnt"
tar -C "$(dirname "$tree")" -cf "$work/tree.tar" "$(basename "$tree")"
echo "tree $tree ($(tar -tf "$work/tree.tar" | wc -l) entries), bonnie++ -n $bn, postmark $pm files, $runs runs, 16 combinations"
csv=$out/paper-raw.csv
echo "test,su,dp,vm,dh,run,seconds,fsck_clean" > "$csv"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.6f", b - a }'; }
total=$((runs * 16)) n=0
for run in $(seq 0 $((runs - 1))); do
  for i in $(seq 0 15); do
    su=$(( (i >> 3) & 1 )) dp=$(( (i >> 2) & 1 )) vm=$(( (i >> 1) & 1 )) dh=$(( i & 1 ))
    n=$((n + 1))
    opts=$([ $su = 1 ] && echo softdep || echo normal)
    opts+=",dirpref=$([ $dp = 1 ] && echo orlov || echo traditional)"
    opts+=",vmiodir=$([ $vm = 1 ] && echo on || echo off)"
    opts+=",dirhash=$([ $dh = 1 ] && echo on,dirhash_maxmem=2M || echo off)"
    printf '[%d/%d] run %d: %s\n' "$n" "$total" "$run" "$opts"
    rm -f "$work/ufs.img"
    $U newfs -b 8192 -f 1024 -s 2G "$work/ufs.img" >/dev/null
    $U mount -o "$opts" "$work/ufs.img" "$work/mnt"
    daemon=$(pgrep -f "ufskit mount -f .*$work/mnt" | head -1)
    rows=()
    row() { rows+=("$1,$su,$dp,$vm,$dh,$run,$2"); }
    # tar: extract, find, remove; the daemon's clean blocks dropped before
    # each (SIGUSR1), as the paper removed its trees between runs.
    t=$(now); tar -C "$work/mnt" -xf "$work/tree.tar"; row tar-extract "$(since "$t")"
    kill -USR1 "$daemon"; sync
    t=$(now); find "$work/mnt" -print >/dev/null; row tar-find "$(since "$t")"
    t=$(now); rm -rf "$work/mnt/$(basename "$tree")"; row tar-remove "$(since "$t")"
    # bonnie++: its own CSV line; a rate of "+++++" means the test took
    # under half a second and bonnie++ reports no figure: left out.
    mkdir "$work/mnt/bonnie"
    line=$("$BONNIE" -d "$work/mnt/bonnie" -s 0 -n "$bn" -u root -q 2>/dev/null | tail -1)
    IFS=, read -r -a f <<< "$line"
    files=$((bn * 1024))
    k=0
    for name in seq-create seq-stat seq-delete rand-create rand-stat rand-delete; do
      rate=${f[$((26 + 2 * k))]:-}
      if [[ $rate =~ ^[0-9]+$ ]] && [ "$rate" -gt 0 ]; then
        row "bonnie-$name" "$(awk -v n="$files" -v r="$rate" 'BEGIN { printf "%.6f", n / r }')"
      fi
      k=$((k + 1))
    done
    rmdir "$work/mnt/bonnie"
    # postmark: its default sizes (500 B to 10 KB), 10 subdirectories.
    mkdir "$work/mnt/pm"
    t=$(now)
    printf 'set location %s\nset number %d\nset transactions %d\nset subdirectories 10\nrun\nquit\n' \
      "$work/mnt/pm" "$pm" "$pm" | postmark >/dev/null
    row postmark "$(since "$t")"
    rmdir "$work/mnt/pm"
    $U umount "$work/mnt"
    if $U fsck -n "$work/ufs.img" >/dev/null; then clean=true; else clean=false; fi
    for r in "${rows[@]}"; do echo "$r,$clean" >> "$csv"; done
    if [ $clean != true ]; then
      $U fsck -n "$work/ufs.img" || true
      echo "paper-mount.sh: the image was not fsck clean after $opts" >&2
      exit 1
    fi
  done
done
cat > "$out/paper.json" <<EOF
{"profile": {"name": "mount-$([ $quick = 1 ] && echo quick || echo full)", "tree": "$tree", "bonnie_files": $((bn * 1024)), "postmark_files": $pm, "runs": $runs},
 "disk": "this machine's image file under FUSE (wall clock)", "disk_description": "$(uname -srm)",
 "cpu_model": {"name": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"}}
EOF
# A bonnie++ test without a figure under every optimisation off has no
# baseline: left out of the analysis (paper.csv; paper-raw.csv keeps it).
awk -F, 'NR == FNR { if ($2 == 0 && $3 == 0 && $4 == 0 && $5 == 0) base[$1] = 1; next }
         FNR == 1 || ($1 in base)' "$csv" "$csv" > "$out/paper.csv"
# The report's "why" column explains the modeled runs; these are not.
why="Wall clock of this machine through the FUSE mount (one client, the daemon's own buffer cache over an image in the host's page cache), not the modeled 2002 machine of ufskit bench paper: every request costs a round trip to the daemon, synchronous writes go to the page cache rather than a disk, and few runs are repeated; compare the direction of effects, not their size (docs/EVALUATION.md)."
python3 - "$out/explanations.json" "$why" <<'PY'
import json, sys
json.dump({k: sys.argv[2] for k in "abcdefghijkl"}, open(sys.argv[1], "w"), indent=1)
PY
echo "results: $csv $out/paper.csv"
python3 analysis/paper_stats.py "$out/paper.csv" --out "$out" >/dev/null
python3 analysis/paper_report.py "$out" --title "ufskit through FUSE: the paper's evaluation with real programs"
