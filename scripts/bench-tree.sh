#!/usr/bin/env bash
# Tar extraction of /usr/include, find, rm -rf, with caches dropped between
# steps (../shared/tools/peer-tree.sh), on a ufskit FUSE mount and on the
# kernel's ext4 on a loop device, side by side in one run: each round runs
# ext4 and then every ufskit configuration, so they share the machine's
# state; the medians over the rounds are compared.
#
# usage: scripts/bench-tree.sh [RUNS] [TREE]   (as root; default 3 runs)
# env:   UFSKIT_MODES="default normal ..."  ufskit configurations, each on
#          its own fresh image: "default" is `ufskit newfs` + `ufskit mount`
#          with no option (soft updates), anything else a mount option list
#          (normal, sync, async, softdep, writeback, threads=2, ...); a
#          configuration may name the file system first, VARIANT@OPTIONS
#          with VARIANT ufs2 (the default), ufs1, ufs2-be or ufs1-be:
#          "default ufs2-be@default ufs1@default" compares byte orders and
#          formats on the same tree
#        UFSKIT_BASELINE=PATH  also run another ufskit binary (an earlier
#          build) with its defaults, as configuration "baseline"
#        UFSKIT_BUSY=1  a busy machine: a CPU hog on every CPU for the whole
#          run (results differ between a quiet and a busy machine)
# Results: results/bench-tree.txt (every run, then the medians and ratios)
# and results/bench-tree.json; the daemon's peak memory (VmHWM) per
# configuration is reported too.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
runs=${1:-3}
tree=${2:-/usr/include}
[ "$(id -u)" = 0 ] || { echo "bench-tree.sh must run as root (loop mount, drop_caches)" >&2; exit 1; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench-tree.sh: RUNS must be a positive integer: $runs" >&2; exit 2; }
scripts/deps.sh
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
peer=$PWD/scripts/peer-tree.sh
work=$(mktemp -d /tmp/ufskit-bench.XXXXXX)
hogs=()
cleanup() {
  stop_hogs
  for d in "$work"/ufs-*; do
    mountpoint -q "$d" && { $U umount "$d" || umount -l "$d"; } || true
  done
  mountpoint -q "$work/ext4" && umount "$work/ext4" || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
tar -C "$(dirname "$tree")" -cf "$work/tree.tar" "$(basename "$tree")"
entries=$(tar -tf "$work/tree.tar" | wc -l)
bytes=$(du -sb "$tree" | cut -f1)
modes=(${UFSKIT_MODES:-default normal})
baseline=${UFSKIT_BASELINE:-}
if [ -n "$baseline" ]; then
  [ -x "$baseline" ] || { echo "bench-tree.sh: UFSKIT_BASELINE $baseline is not an executable" >&2; exit 2; }
  modes+=(baseline)
fi
# The binary, newfs options and mount options of configuration $1.
bin_of() { if [ "$1" = baseline ]; then echo "$baseline"; else echo "$U"; fi; }
newfs_args_of() {
  case "$1" in
    ufs1@*) echo "-O 1" ;;
    ufs2-be@*) echo "-B be" ;;
    ufs1-be@*) echo "-O 1 -B be" ;;
    *) echo "" ;;
  esac
}
mount_opts_of() {
  local m=${1#*@}
  case "$m" in default|baseline) echo "" ;; *) echo "$m" ;; esac
}
start_hogs
echo "tree: $tree ($entries entries, $((bytes / 1000000)) MB), $runs runs, $machine machine, ufskit: ${modes[*]}"
mkdir -p "$work/ext4"
truncate -s 4G "$work/ext4.img" && mkfs.ext4 -q -F "$work/ext4.img"
mount -o loop "$work/ext4.img" "$work/ext4"
out=results/bench-tree.txt
mkdir -p results
echo "tree: $tree ($entries entries), runs: $runs, $machine machine, seconds (wall)" > "$out"
: > "$work/raw"
daemon_pid() { pgrep -f "ufskit mount.*$1" | head -1; }
for i in $(seq 0 $((${#modes[@]} - 1))); do
  m=${modes[$i]}
  mkdir -p "$work/ufs-$i"
  b=$(bin_of "$m")
  # shellcheck disable=SC2046
  $b newfs $(newfs_args_of "$m") -s 4G "$work/ufs-$i.img" >/dev/null
  o=$(mount_opts_of "$m")
  if [ -z "$o" ]; then
    $b mount "$work/ufs-$i.img" "$work/ufs-$i"
  else
    $b mount -o "$o" "$work/ufs-$i.img" "$work/ufs-$i"
  fi
done
for r in $(seq "$runs"); do
  e=$(bash "$peer" "$work/ext4" "$work/tree.tar")
  echo "run $r ext4: $e" | tee -a "$out"
  echo "ext4 $e" >> "$work/raw"
  for i in $(seq 0 $((${#modes[@]} - 1))); do
    m=${modes[$i]}
    # ufskit keeps its own buffer cache in the daemon: `stats
    # --drop-caches` empties it and returns when done, so "cold" means
    # cold for both.
    drop="$(bin_of "$m") stats --drop-caches $work/ufs-$i"
    $drop >/dev/null
    u=$(UFSKIT_DROP="$drop" bash "$peer" "$work/ufs-$i" "$work/tree.tar")
    echo "run $r ufskit $m: $u" | tee -a "$out"
    echo "ufskit:$m $u" >> "$work/raw"
  done
done
for i in $(seq 0 $((${#modes[@]} - 1))); do
  m=${modes[$i]}
  pid=$(daemon_pid "ufs-$i.img")
  hwm=$(awk '/VmHWM/ {print $2}' /proc/"$pid"/status 2>/dev/null || echo 0)
  echo "ufskit:$m hwm_kib=$hwm" >> "$work/raw"
  $(bin_of "$m") umount "$work/ufs-$i"
  echo "fsck after $m: $($U fsck -n "$work/ufs-$i.img" | tail -1)" | tee -a "$out"
done
python3 - "$work/raw" "$out" "$machine" "$tree" "$entries" <<'EOF' | tee -a "$out"
import json, re, statistics, sys
raw, out, machine, tree, entries = sys.argv[1:6]
runs, hwm = {}, {}
for line in open(raw):
    name, rest = line.split(None, 1)
    if rest.startswith("hwm_kib="):
        hwm[name] = int(rest.split("=")[1])
        continue
    vals = dict((k, float(v)) for k, v in re.findall(r"(\w+)=([0-9.]+)", rest))
    runs.setdefault(name, []).append(vals)
steps = ["extract", "find", "rm"]
med = {n: {s: statistics.median(v[s] for v in vs) for s in steps} for n, vs in runs.items()}
print("\nmedians of %d runs, %s machine (seconds; ratio to ext4)" % (len(runs["ext4"]), machine))
print("%-24s %16s %16s %16s %10s" % ("file system", "extract", "find", "rm -rf", "peak RSS"))
for n in med:
    cells = []
    for s in steps:
        v, e = med[n][s], med["ext4"][s]
        cells.append("%.3f" % v if n == "ext4" else "%.3f (%.1fx)" % (v, v / e if e else 0))
    rss = "%d MB" % (hwm[n] // 1024) if n in hwm else "-"
    print("%-24s %16s %16s %16s %10s" % (n, *cells, rss))
json.dump({"tree": tree, "entries": int(entries), "machine": machine, "runs": runs,
           "medians": med, "daemon_peak_rss_kib": hwm},
          open(out.replace(".txt", ".json"), "w"), indent=1)
EOF
echo "wrote $out and ${out%.txt}.json"
