#!/usr/bin/env bash
# How much of a FUSE round trip is the transport? The same in-memory FUSE
# file system (libfuse's example/memfs_ll, built from a libfuse checkout of
# 3.18 or later) served over /dev/fuse (read/write by a pool of threads)
# and over FUSE-over-io_uring (one ring per CPU, a request served on the
# CPU of the process that made it), beside the kernel's ext4 on a loop
# device and ufskit over each transport (uring=off, uring=on), in one run: ../shared/tools/bigdir.py with the
# client pinned to one CPU and unpinned, and tar -x / find / rm -rf of a
# tree without its symlinks (scripts/peer-tree.sh). memfs keeps everything
# in memory, so what
# differs between its two rows is the transport alone.
#
# usage: scripts/eval-fuse-transport.sh LIBFUSE_BUILD_DIR [N] [TREE]
#        (as root; N files for bigdir.py, default 20000; TREE default
#        /usr/include)
# env:   UFSKIT_RUNS=R  rounds (default 3; medians reported)
#        UFSKIT_BUSY=1  a CPU hog on every CPU throughout
# The kernel's fuse.enable_uring parameter is turned on for the run and
# put back as it was. Writes results/fuse-transport.json.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bench-common.sh
[ "$(id -u)" = 0 ] || { echo "eval-fuse-transport.sh must run as root" >&2; exit 1; }
build=${1:?usage: scripts/eval-fuse-transport.sh LIBFUSE_BUILD_DIR [N] [TREE]}
n=${2:-20000}
tree=${3:-/usr/include}
runs=${UFSKIT_RUNS:-3}
memfs=$build/example/memfs_ll
[ -x "$memfs" ] || { echo "eval-fuse-transport.sh: $memfs not found (meson setup build && ninja -C build in a libfuse checkout)" >&2; exit 1; }
param=/sys/module/fuse/parameters/enable_uring
[ -w "$param" ] || { echo "eval-fuse-transport.sh: this kernel has no FUSE-over-io_uring ($param)" >&2; exit 1; }
tools=${UFSKIT_TOOLS:-../shared/tools}
bigdir=$(realpath -e "$tools/bigdir.py")
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
work=$(mktemp -d /tmp/ufskit-transport.XXXXXX)
old_uring=$(cat "$param")
hogs=()
machine=quiet
cleanup() {
  stop_hogs
  for d in "$work"/mnt-*; do
    mountpoint -q "$d" && { umount "$d" 2>/dev/null || umount -l "$d"; } || true
  done
  echo "$old_uring" > "$param" || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
echo Y > "$param"
start_hogs
# memfs_ll makes no symlinks: the tree is taken without them.
mkdir -p "$work/src"
cp -a "$tree" "$work/src/"
find "$work/src" -type l -delete
tar -C "$work/src" -cf "$work/tree.tar" "$(basename "$tree")"
rm -rf "$work/src"
entries=$(tar -tf "$work/tree.tar" | wc -l)

# The file systems, each mounted once for the whole run.
mkdir -p "$work"/mnt-{ext4,memfs-dev,memfs-uring,ufskit-dev,ufskit-uring}
truncate -s 4G "$work/ext4.img" && mkfs.ext4 -q -F "$work/ext4.img"
mount -o loop "$work/ext4.img" "$work/mnt-ext4"
# Same options both ways: attributes and names cached as long as ufskit
# caches them, the kernel's write-back cache on, as ufskit's default.
"$memfs" -o no_timeout,writeback_cache,default_permissions "$work/mnt-memfs-dev" \
  2>"$work/memfs-dev.log"
"$memfs" -o no_timeout,writeback_cache,default_permissions,io_uring "$work/mnt-memfs-uring" \
  2>"$work/memfs-uring.log"
for t in dev uring; do
  $U newfs -s 4G "$work/ufskit-$t.img" >/dev/null
done
$U mount -o uring=off "$work/ufskit-dev.img" "$work/mnt-ufskit-dev"
$U mount -o uring=on "$work/ufskit-uring.img" "$work/mnt-ufskit-uring"
sleep 1
for fs in memfs-dev memfs-uring; do
  grep -o 'io_uring=[a-z_:]*' "$work/$fs.log" | head -1 | sed "s/^/$fs: /" || true
done

: > "$work/raw"
for r in $(seq "$runs"); do
  for fs in ext4 memfs-dev memfs-uring ufskit-dev ufskit-uring; do
    m=$work/mnt-$fs
    for pin in 0 none; do
      if [ "$pin" = none ]; then c=(); else c=(taskset -c "$pin"); fi
      out=$("${c[@]}" python3 "$bigdir" "$m/big-$r-$pin" "$n")
      echo "$fs bigdir-$pin $out" | tee -a "$work/raw"
      rm -rf "$m/big-$r-$pin"
    done
    if [[ $fs == ufskit* ]]; then
      t=$(UFSKIT_DROP="$U stats --drop-caches $m" bash scripts/peer-tree.sh "$m" "$work/tree.tar")
    else
      t=$(bash scripts/peer-tree.sh "$m" "$work/tree.tar")
    fi
    echo "$fs tree $t" | tee -a "$work/raw"
  done
done
python3 - "$work/raw" "$machine" "$n" "$entries" <<'EOF'
import json, re, statistics, sys
raw, machine, n, entries = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
vals = {}
for line in open(raw):
    fs, test, rest = line.split(None, 2)
    for k, v in re.findall(r"(\w+)=([0-9.]+)", rest):
        vals.setdefault((fs, test, k), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
fss = ["ext4", "memfs-dev", "memfs-uring", "ufskit-dev", "ufskit-uring"]
print(f"\nmedians, {machine} machine; bigdir.py N={n} (us per op); tree of {entries} entries (s)")
for test, keys in [("bigdir-0", ["create", "rstat", "nostat", "unlink"]),
                   ("bigdir-none", ["create", "rstat", "nostat", "unlink"]),
                   ("tree", ["extract", "find", "rm"])]:
    label = {"bigdir-0": "client on CPU 0", "bigdir-none": "client unpinned", "tree": "tree"}[test]
    print(f"\n{label:18s}" + "".join(f"{k:>10s}" for k in keys))
    for fs in fss:
        print(f"{fs:18s}" + "".join(
            f"{med.get((fs, test, k), float('nan')):10.{3 if test == 'tree' else 1}f}" for k in keys))
out = {"machine": machine, "n": n, "tree_entries": entries,
       "medians": {f"{fs} {test} {k}": v for (fs, test, k), v in med.items()},
       "runs": {f"{fs} {test} {k}": v for (fs, test, k), v in vals.items()}}
import os
os.makedirs("results", exist_ok=True)
json.dump(out, open("results/fuse-transport.json", "w"), indent=1)
print("\nwrote results/fuse-transport.json")
EOF
