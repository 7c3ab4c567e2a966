#!/usr/bin/env bash
# Large directories: the external judge ../shared/tools/bigdir.py (create N
# empty files, stat them in random order, stat N missing names, unlink them)
# on the kernel's ext4 on a loop device and on a ufskit FUSE mount, side by
# side in one run, the two file systems alternating per size. Each size runs
# in a fresh directory. Writes results/bigdir.json.
# usage: scripts/bench-bigdir.sh [N ...]   (as root; default 2000 100000 1000000)
# env:   UFSKIT_TOOLS=DIR        where bigdir.py lives (default ../shared/tools)
#        UFSKIT_MOUNT_OPTS=OPTS  extra ufskit mount options (e.g. dirhash=off)
#        UFSKIT_RUNS=R           runs per size and file system (default 3; the
#                                median is reported)
#        UFSKIT_BUSY=1           a busy machine: a CPU hog on every CPU
#        UFSKIT_PIN=CPUS         CPU list the client (bigdir.py) is pinned to on
#                                both file systems (default 0; "none": unpinned).
#                                The ufskit daemon is not pinned: it follows its
#                                client (-o affinity=follow, see docs/DIRHASH.md).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
[ "$(id -u)" = 0 ] || { echo "bench-bigdir.sh must run as root (loop mount of the ext4 peer)" >&2; exit 1; }
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(2000 100000 1000000)
runs=${UFSKIT_RUNS:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench-bigdir.sh: UFSKIT_RUNS must be a positive integer: $runs" >&2; exit 2; }
for n in "${sizes[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "bench-bigdir.sh: size must be a positive integer: $n" >&2; exit 2; }
done
tools=${UFSKIT_TOOLS:-../shared/tools}
bigdir=$(realpath -e "$tools/bigdir.py" 2>/dev/null) ||
  { echo "bench-bigdir.sh: $tools/bigdir.py not found (set UFSKIT_TOOLS=dir)" >&2; exit 1; }
opts=${UFSKIT_MOUNT_OPTS:-}
pin=${UFSKIT_PIN:-0}
start_hogs
client=()
if [ "$pin" != none ]; then
  taskset -c "$pin" true 2>/dev/null || { echo "bench-bigdir.sh: UFSKIT_PIN=$pin is not a usable CPU list" >&2; exit 2; }
  client=(taskset -c "$pin")
fi
# Idle vCPUs that halt at once make every cross-CPU wake-up slow (see
# docs/DIRHASH.md); recorded with the results.
halt_poll=$(cat /sys/module/haltpoll/parameters/guest_halt_poll_ns 2>/dev/null || echo n/a)
scripts/deps.sh
command -v python3 >/dev/null || { echo "bench-bigdir.sh: python3 is needed" >&2; exit 1; }
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
out=$PWD/results/bigdir.json
work=$(mktemp -d /tmp/ufskit-bigdir.XXXXXX)
cleanup() {
  stop_hogs
  if mountpoint -q "$work/ufs"; then
    $U umount "$work/ufs" || umount -l "$work/ufs" || true
  fi
  if mountpoint -q "$work/ext4"; then
    umount "$work/ext4" || umount -l "$work/ext4" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Parses the raw result lines ("FS N create=..us rstat=..us ..."), rewrites
# the JSON, and prints either the table of one size or the summary.
cat >"$work/report.py" <<'EOF'
import json, os, re, statistics, sys
raw, out, opts, pin, halt_poll, machine, what = sys.argv[1:8]
ops = ["create", "rstat", "nostat", "unlink"]
runs = []
hwm = None
with open(raw) as f:
    for line in f:
        if line.startswith("hwm_kib "):
            hwm = int(line.split()[1])
            continue
        fs, n, rest = line.split(None, 2)
        vals = dict((k, float(v)) for k, v in re.findall(r"(\w+)=([0-9.]+)us", rest))
        missing = [op for op in ops if op not in vals]
        if missing:
            sys.exit("bench-bigdir.sh: no %s in bigdir.py output: %r" % (", ".join(missing), rest.strip()))
        run = {"fs": fs, "n": int(n)}
        run.update(("%s_us" % op, vals[op]) for op in ops)
        runs.append(run)
os.makedirs(os.path.dirname(out), exist_ok=True)
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump({"tool": "bigdir.py", "mount_opts": opts, "client_cpus": pin,
               "guest_halt_poll_ns": halt_poll, "machine": machine,
               "daemon_peak_rss_kib": hwm, "runs": runs}, f, indent=1)
    f.write("\n")
os.replace(tmp, out)
# Medians over the runs of each file system and size.
groups = {}
for r in runs:
    groups.setdefault((r["fs"], r["n"]), []).append(r)
by = {k: {op + "_us": statistics.median(x[op + "_us"] for x in v) for op in ops}
      for k, v in groups.items()}
def ratio(a, b):
    return "%.2f" % (a / b) if b > 0 else "-"
if what == "summary":
    ns = sorted({r["n"] for r in runs})
    if len(ns) < 2:
        sys.exit(0)
    lo, hi = ns[0], ns[-1]
    print("\nufskit cost at largest N / cost at smallest N (N=%d / N=%d; ext4 for reference; medians, %s machine)" % (hi, lo, machine))
    print("%-8s %10s %10s" % ("op", "ufskit", "ext4"))
    for op in ops:
        k = op + "_us"
        cells = []
        for fs in ("ufskit", "ext4"):
            a, b = by.get((fs, hi)), by.get((fs, lo))
            cells.append(ratio(a[k], b[k]) if a and b else "-")
        print("%-8s %10s %10s" % (op, *cells))
    if hwm:
        print("ufskit daemon peak memory (VmHWM): %d MB" % (hwm // 1024))
else:
    n = int(what)
    e, u = by[("ext4", n)], by[("ufskit", n)]
    print("\nN=%d (medians of %d runs, %s machine)" % (n, len(groups[("ufskit", n)]), machine))
    print("%-8s %10s %10s %14s" % ("op", "ext4 us", "ufskit us", "ufskit/ext4"))
    for op in ops:
        k = op + "_us"
        print("%-8s %10.1f %10.1f %14s" % (op, e[k], u[k], ratio(u[k], e[k])))
EOF
: >"$work/raw"

mkdir -p "$work/ufs" "$work/ext4"
# Room for the largest directory: inodes for twice the largest N on both.
maxn=$(printf '%s\n' "${sizes[@]}" | sort -n | tail -1)
truncate -s 8G "$work/ext4.img" && mkfs.ext4 -q -F -N $((2 * maxn + 65536)) "$work/ext4.img"
mount -o loop "$work/ext4.img" "$work/ext4"
$U newfs -s 8g -i 4096 "$work/ufs.img" >/dev/null
$U mount ${opts:+-o "$opts"} "$work/ufs.img" "$work/ufs"
echo "bigdir.py: $bigdir"
echo "sizes: ${sizes[*]}; $runs runs; $machine machine; ufskit mount options: ${opts:-(none)}; client CPUs: $pin; guest_halt_poll_ns: $halt_poll"

for n in "${sizes[@]}"; do
  for r in $(seq "$runs"); do
    for fs in ext4 ufs; do
      name=$fs; [ $fs = ufs ] && name=ufskit
      d=$work/$fs/d$n
      while [ -e "$d" ]; do d=$d.x; done   # a size given twice still gets a fresh directory
      line=$("${client[@]}" python3 "$bigdir" "$d" "$n")
      echo "$name N=$n run $r: $line"
      echo "$name $n $line" >>"$work/raw"
      rmdir "$d"
    done
  done
  python3 "$work/report.py" "$work/raw" "$out" "$opts" "$pin" "$halt_poll" "$machine" "$n"
done
pid=$(pgrep -f "ufskit mount.*$work/ufs.img" | head -1)
echo "hwm_kib $(awk '/VmHWM/ {print $2}' /proc/"$pid"/status 2>/dev/null || echo 0)" >>"$work/raw"
python3 "$work/report.py" "$work/raw" "$out" "$opts" "$pin" "$halt_poll" "$machine" summary

$U umount "$work/ufs"
umount "$work/ext4"
echo
$U fsck -n "$work/ufs.img" | tail -1
echo "wrote $out"
