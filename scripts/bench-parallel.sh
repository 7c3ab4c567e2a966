#!/usr/bin/env bash
# Parallel programs on one mount: 1, 2 and 4 `tar -x` of the same tree at
# once into one file system (each into its own directory), on a ufskit
# mount and on the kernel's ext4 on a loop device, side by side in each
# round; caches dropped before each run. Reports the wall time of each run
# (start of the first to the end of the last) and the CPU seconds it
# cost: the tar processes' own (user + system, from their rusage) plus,
# for ufskit, the daemon's (utime + stime of /proc/PID/stat before and
# after). Medians over the rounds, and each ufskit figure's ratio to ext4.
#
# usage: scripts/bench-parallel.sh [RUNS] [TREE]   (as root; default 3, /usr/include)
# env:   UFSKIT_OPTS=OPTIONS  mount options for ufskit
#        UFSKIT_BUSY=1        a CPU hog on every CPU for the whole run
#        JOBS="1 2 4"         how many extractions at once
# Results: results/bench-parallel.txt and .json.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
runs=${1:-3}
tree=${2:-/usr/include}
[ "$(id -u)" = 0 ] || { echo "bench-parallel.sh must run as root (loop mount, drop_caches)" >&2; exit 1; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench-parallel.sh: RUNS must be a positive integer: $runs" >&2; exit 2; }
scripts/deps.sh
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
opts=${UFSKIT_OPTS:-}
jobs=(${JOBS:-1 2 4})
work=$(mktemp -d "${TMPDIR:-/tmp}/ufskit-parallel.XXXXXX")
hogs=()
trap cleanup_ufs_and_ext4 EXIT
trap 'exit 130' INT TERM
start_hogs
tar -C "$(dirname "$tree")" -cf "$work/tree.tar" "$(basename "$tree")"
entries=$(tar -tf "$work/tree.tar" | wc -l)
mkdir -p "$work/ext4" "$work/ufs"
truncate -s 8G "$work/ext4.img" && mkfs.ext4 -q -F "$work/ext4.img"
mount -o loop "$work/ext4.img" "$work/ext4"
$U newfs -s 8G "$work/ufs.img" >/dev/null
if [ -n "$opts" ]; then $U mount -o "$opts" "$work/ufs.img" "$work/ufs"; else $U mount "$work/ufs.img" "$work/ufs"; fi
pid=$(pgrep -f "ufskit mount.*$work/ufs.img" | head -1)
hz=$(getconf CLK_TCK)
# CPU ticks (user + system) of the daemon so far.
daemon_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
out=results/bench-parallel.txt
mkdir -p results
echo "tree: $tree ($entries entries), jobs: ${jobs[*]}, $runs runs, $machine machine, ufskit options: ${opts:-none}" | tee "$out"
: > "$work/raw"
# One run of N extractions into file system directory $1: prints
# "wall=S cpu=S" (cpu: the tar processes' user + system time, from
# /usr/bin/time, plus the daemon's for ufskit).
one_run() {
  local d=$1 n=$2 fs=$3
  rm -rf "$d"/x*
  sync
  echo 3 > /proc/sys/vm/drop_caches
  [ "$fs" = ufs ] && $U stats --drop-caches "$d" >/dev/null
  local before=0
  [ "$fs" = ufs ] && before=$(daemon_ticks)
  local start end
  start=$(date +%s.%N)
  for i in $(seq "$n"); do
    mkdir -p "$d/x$i"
    /usr/bin/time -f "%U %S" -o "$work/time.$i" tar -C "$d/x$i" -xf "$work/tree.tar" &
  done
  wait
  end=$(date +%s.%N)
  local cpu
  cpu=$(cat "$work"/time.* | awk '{s += $1 + $2} END {print s}')
  rm -f "$work"/time.*
  if [ "$fs" = ufs ]; then
    cpu=$(echo "$cpu $(daemon_ticks) $before $hz" | awk '{print $1 + ($2 - $3) / $4}')
  fi
  echo "wall=$(echo "$end $start" | awk '{printf "%.3f", $1 - $2}') cpu=$(printf %.3f "$cpu")"
}
for r in $(seq "$runs"); do
  for n in "${jobs[@]}"; do
    for fs in ext4 ufs; do
      res=$(one_run "$work/$fs" "$n" "$fs")
      name=$fs; [ "$fs" = ufs ] && name=ufskit
      echo "run $r, $n at once, $name: $res" | tee -a "$out"
      echo "$name $n $res" >> "$work/raw"
    done
  done
done
$U umount "$work/ufs"
echo "fsck after the runs: $($U fsck -n "$work/ufs.img" | tail -1)" | tee -a "$out"
python3 - "$work/raw" "$out" "$machine" "$tree" "$entries" <<'EOF' | tee -a "$out"
import json, re, statistics, sys
raw, out, machine, tree, entries = sys.argv[1:6]
runs = {}
for line in open(raw):
    name, n, rest = line.split(None, 2)
    vals = {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", rest)}
    runs.setdefault((name, int(n)), []).append(vals)
med = {k: {m: statistics.median(v[m] for v in vs) for m in ("wall", "cpu")} for k, vs in runs.items()}
print("\nmedians, %s machine: wall seconds, CPU seconds per extraction (ufskit: with the daemon's)" % machine)
print("%-10s %24s %24s %14s" % ("at once", "ext4 wall / cpu each", "ufskit wall / cpu each", "wall vs 1"))
ns = sorted({n for (_, n) in med})
for n in ns:
    e, u = med[("ext4", n)], med[("ufskit", n)]
    one = med[("ufskit", ns[0])]["wall"]
    print("%-10d %24s %24s %14s" % (
        n,
        "%.3f / %.3f" % (e["wall"], e["cpu"] / n),
        "%.3f (%.1fx) / %.3f (%.1fx)" % (u["wall"], u["wall"] / e["wall"], u["cpu"] / n, (u["cpu"] / n) / (e["cpu"] / n)),
        "%.2fx" % (u["wall"] / one)))
json.dump({"tree": tree, "entries": int(entries), "machine": machine,
           "runs": {"%s/%d" % k: v for k, v in runs.items()},
           "medians": {"%s/%d" % k: v for k, v in med.items()}},
          open(out.replace(".txt", ".json"), "w"), indent=1)
EOF
echo "wrote $out and ${out%.txt}.json"
