#!/usr/bin/env bash
# Tar extraction of /usr/include, find, rm -rf, with caches dropped between
# steps (../shared/tools/peer-tree.sh), on a ufskit FUSE mount and on the
# kernel's ext4 on a loop device, side by side in one run; ufskit once per
# write mode (UFSKIT_MODES, default "normal sync async softdep"; each on a
# fresh image), so the modes and ext4 share the machine's state.
# usage: scripts/bench-tree.sh [RUNS] [TREE]   (as root)
# Results also go to results/bench-tree.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
tree=${2:-/usr/include}
[ "$(id -u)" = 0 ] || { echo "bench-tree.sh must run as root (loop mount, drop_caches)" >&2; exit 1; }
scripts/deps.sh
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
peer=$PWD/scripts/peer-tree.sh
work=$(mktemp -d /tmp/ufskit-bench.XXXXXX)
cleanup() {
  mountpoint -q "$work/ufs" && $U umount "$work/ufs" || true
  mountpoint -q "$work/ext4" && umount "$work/ext4" || true
  rm -rf "$work"
}
trap cleanup EXIT
tar -C "$(dirname "$tree")" -cf "$work/tree.tar" "$(basename "$tree")"
entries=$(tar -tf "$work/tree.tar" | wc -l)
bytes=$(du -sb "$tree" | cut -f1)
echo "tree: $tree ($entries entries, $((bytes / 1000000)) MB), $runs runs"
mkdir -p "$work/ufs" "$work/ext4"
truncate -s 4G "$work/ext4.img" && mkfs.ext4 -q -F "$work/ext4.img"
mount -o loop "$work/ext4.img" "$work/ext4"
modes=${UFSKIT_MODES:-normal sync async softdep}
out=results/bench-tree.txt
mkdir -p results
echo "tree: $tree ($entries entries), runs: $runs, modes: $modes, seconds (wall)" > "$out"
for mode in $modes; do
  rm -f "$work/ufs.img"
  $U newfs -s 4G "$work/ufs.img" >/dev/null
  $U mount -o "$mode${UFSKIT_MOUNT_OPTS:+,$UFSKIT_MOUNT_OPTS}" "$work/ufs.img" "$work/ufs"
  # ufskit keeps its own buffer cache in the daemon: `stats --drop-caches`
  # empties it and returns when done, so "cold" means cold for both.
  drop="$U stats --drop-caches $work/ufs"
  for i in $(seq "$runs"); do
    e=$(bash "$peer" "$work/ext4" "$work/tree.tar")
    $drop >/dev/null
    u=$(UFSKIT_DROP="$drop" bash "$peer" "$work/ufs" "$work/tree.tar")
    echo "run $i ext4:            $e" | tee -a "$out"
    printf 'run %s ufskit %-8s %s\n' "$i" "$mode:" "$u" | tee -a "$out"
  done
  $U umount "$work/ufs"
  echo "fsck after $mode: $($U fsck -n "$work/ufs.img" | tail -1)" | tee -a "$out"
done
