#!/usr/bin/env bash
# Making an image from a tree, three ways, side by side in each round:
#   ufskit makefs        (no mount, no root; size found)
#   Debian's makefs      (NetBSD's: -t ffs -o version=2; size found)
#   ufskit newfs + mount + cp -a + umount   (the way without makefs)
# Reports each run's wall time and the image's allocated bytes, then the
# medians and each one's ratio to ufskit makefs; checks every image with
# ufskit fsck -n.
#
# usage: scripts/bench-makefs.sh [RUNS] [TREE]   (default 5, /usr/include;
#        the mount way needs root, and is left out without it)
# Results: results/bench-makefs.txt and .json.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
tree=${2:-/usr/include}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench-makefs.sh: RUNS must be a positive integer: $runs" >&2; exit 2; }
[ -d "$tree" ] || { echo "bench-makefs.sh: $tree is not a directory" >&2; exit 2; }
[ "$(id -u)" = 0 ] && scripts/deps.sh
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
work=$(mktemp -d "${TMPDIR:-/tmp}/ufskit-makefs.XXXXXX")
cleanup() {
  mountpoint -q "$work/mnt" && { $U umount "$work/mnt" || umount -l "$work/mnt"; } || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ways=(ufskit-makefs)
command -v makefs >/dev/null && ways+=(debian-makefs)
[ "$(id -u)" = 0 ] && [ -e /dev/fuse ] && ways+=(newfs-mount-cp)
entries=$(find "$tree" | wc -l)
bytes=$(du -sb "$tree" | cut -f1)
out=results/bench-makefs.txt
mkdir -p results "$work/mnt"
echo "tree: $tree ($entries entries, $bytes bytes), $runs runs, ways: ${ways[*]}" | tee "$out"
: > "$work/raw"
one() {
  local way=$1 img=$work/img
  rm -f "$img"
  sync
  local start end
  start=$(date +%s.%N)
  case $way in
    ufskit-makefs) $U makefs -q "$img" "$tree" ;;
    debian-makefs) makefs -t ffs -o version=2 "$img" "$tree" >/dev/null ;;
    newfs-mount-cp)
      # Sized as ufskit makefs found it would need, doubled for slack.
      $U newfs -s "$(( $(stat -c %s "$work/sized") * 2 ))" "$img" >/dev/null
      $U mount "$img" "$work/mnt"
      cp -a "$tree/." "$work/mnt/"
      $U umount "$work/mnt" ;;
  esac
  end=$(date +%s.%N)
  $U fsck -n "$img" >/dev/null || { echo "bench-makefs.sh: $way made an image fsck does not call clean" >&2; exit 1; }
  local used
  used=$(( $(stat -c %b "$img") * 512 ))
  echo "$way $(echo "$end $start" | awk '{printf "%.3f", $1 - $2}') $used"
}
$U makefs -q "$work/sized" "$tree"
for r in $(seq "$runs"); do
  for w in "${ways[@]}"; do
    res=$(one "$w")
    echo "$res" >> "$work/raw"
    echo "run $r: $res" | sed 's/ \([0-9.]*\) \([0-9]*\)$/: \1 s, image \2 bytes allocated/' | tee -a "$out"
  done
done
python3 - "$work/raw" "$out" "$tree" "$entries" "$runs" <<'PY'
import json, statistics, sys
raw, out, tree, entries, runs = sys.argv[1:]
by = {}
for line in open(raw):
    w, t, b = line.split()
    by.setdefault(w, []).append((float(t), int(b)))
base = statistics.median(t for t, _ in by["ufskit-makefs"])
res = {"tree": tree, "entries": int(entries), "runs": int(runs), "ways": {}}
lines = ["", "medians:"]
for w, v in by.items():
    t = statistics.median(x for x, _ in v)
    b = statistics.median(y for _, y in v)
    res["ways"][w] = {"seconds": t, "image_bytes_allocated": b, "runs": [x for x, _ in v]}
    lines.append("  %-16s %7.3f s  %5.2fx ufskit makefs  image %d MiB allocated" % (w, t, t / base, b >> 20))
print("\n".join(lines))
with open(out, "a") as f:
    f.write("\n".join(lines) + "\n")
json.dump(res, open(out.replace(".txt", ".json"), "w"), indent=1)
PY
