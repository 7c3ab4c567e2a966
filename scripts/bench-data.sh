#!/usr/bin/env bash
# The data path, large files: fio on a ufskit mount and on the kernel's
# ext4 on a loop device, side by side in one run (each round runs ext4,
# then ufskit), medians over the rounds:
#   seqwrite   one 2 GiB file written in 1 MiB blocks, fsync at the end
#   seqread    the same file read back in 1 MiB blocks, caches dropped
#              (the kernel's, and the daemon's with `stats --drop-caches`)
#   randwrite  4 KiB writes at random offsets of a 256 MiB file, an fsync
#              every 32 writes (a database-like rewrite in place)
# Both images are files in the same directory ($TMPDIR or /tmp), so both
# file systems end on the same disk through the host's page cache.
#
# usage: scripts/bench-data.sh [RUNS]   (as root; default 3 runs)
# env:   UFSKIT_OPTS=OPTIONS   mount options for ufskit (default: none)
#        UFSKIT_BUSY=1         a CPU hog on every CPU for the whole run
#        SIZE=2G RANDSIZE=256M  the file sizes
# Results: results/bench-data.txt (every run, then medians and ratios) and
# results/bench-data.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
runs=${1:-3}
[ "$(id -u)" = 0 ] || { echo "bench-data.sh must run as root (loop mount, drop_caches)" >&2; exit 1; }
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench-data.sh: RUNS must be a positive integer: $runs" >&2; exit 2; }
scripts/deps.sh
command -v fio >/dev/null || { echo "bench-data.sh: fio is not installed (apt-get install fio)" >&2; exit 1; }
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
size=${SIZE:-2G}
randsize=${RANDSIZE:-256M}
opts=${UFSKIT_OPTS:-}
work=$(mktemp -d "${TMPDIR:-/tmp}/ufskit-data.XXXXXX")
hogs=()
trap cleanup_ufs_and_ext4 EXIT
trap 'exit 130' INT TERM
start_hogs
mkdir -p "$work/ext4" "$work/ufs"
truncate -s 8G "$work/ext4.img" && mkfs.ext4 -q -F "$work/ext4.img"
mount -o loop "$work/ext4.img" "$work/ext4"
$U newfs -s 8G "$work/ufs.img" >/dev/null
if [ -n "$opts" ]; then $U mount -o "$opts" "$work/ufs.img" "$work/ufs"; else $U mount "$work/ufs.img" "$work/ufs"; fi
out=results/bench-data.txt
mkdir -p results
echo "fio: seqwrite/seqread $size in 1 MiB blocks, randwrite 4 KiB over $randsize with fsync every 32; $runs runs, $machine machine; ufskit options: ${opts:-none}" | tee "$out"
: > "$work/raw"
# MB/s (seqwrite, seqread) or IOPS (randwrite) of one fio job.
fio_job() {
  fio --output-format=json "$@" | python3 -c '
import json, sys
j = json.load(sys.stdin)["jobs"][0]
w, r = j["write"], j["read"]
print("%.1f %.0f %.1f" % (w["bw_bytes"] / 1e6, w["iops"], r["bw_bytes"] / 1e6))'
}
drop() {
  sync
  echo 3 > /proc/sys/vm/drop_caches
  if [ "$1" = ufs ]; then $U stats --drop-caches "$work/ufs" >/dev/null; fi
}
for r in $(seq "$runs"); do
  for fs in ext4 ufs; do
    d=$work/$fs
    rm -f "$d/seq" "$d/rand"
    drop "$fs"
    read -r wmb _ _ < <(fio_job --name=seqwrite --filename="$d/seq" --rw=write --bs=1M --size="$size" --ioengine=psync --end_fsync=1)
    drop "$fs"
    read -r _ _ rmb < <(fio_job --name=seqread --filename="$d/seq" --rw=read --bs=1M --size="$size" --ioengine=psync)
    rm -f "$d/seq"
    drop "$fs"
    read -r _ iops _ < <(fio_job --name=randwrite --filename="$d/rand" --rw=randwrite --bs=4k --size="$randsize" --ioengine=psync --fsync=32 --randrepeat=1)
    rm -f "$d/rand"
    name=$fs; [ "$fs" = ufs ] && name=ufskit
    echo "run $r $name: seqwrite=$wmb seqread=$rmb randwrite=$iops" | tee -a "$out"
    echo "$name seqwrite=$wmb seqread=$rmb randwrite=$iops" >> "$work/raw"
  done
done
$U umount "$work/ufs"
echo "fsck after the runs: $($U fsck -n "$work/ufs.img" | tail -1)" | tee -a "$out"
python3 - "$work/raw" "$out" "$machine" <<'EOF' | tee -a "$out"
import json, re, statistics, sys
raw, out, machine = sys.argv[1:4]
runs = {}
for line in open(raw):
    name, rest = line.split(None, 1)
    runs.setdefault(name, []).append({k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", rest)})
tests = [("seqwrite", "MB/s"), ("seqread", "MB/s"), ("randwrite", "IOPS")]
med = {n: {t: statistics.median(v[t] for v in vs) for t, _ in tests} for n, vs in runs.items()}
print("\nmedians of %d runs, %s machine (higher is better; ufskit as a share of ext4)" % (len(runs["ext4"]), machine))
print("%-10s %22s %22s %22s" % ("", *("%s (%s)" % t for t in tests)))
for n in med:
    cells = []
    for t, _ in tests:
        v, e = med[n][t], med["ext4"][t]
        cells.append("%.1f" % v if n == "ext4" else "%.1f (%.2fx)" % (v, v / e if e else 0))
    print("%-10s %22s %22s %22s" % (n, *cells))
json.dump({"machine": machine, "runs": runs, "medians": med},
          open(out.replace(".txt", ".json"), "w"), indent=1)
EOF
echo "wrote $out and ${out%.txt}.json"
