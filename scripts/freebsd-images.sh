#!/usr/bin/env bash
# Images made by FreeBSD itself, read without a mount and through it:
# dissect.ffs's test data (a FreeBSD UFS2 image and three UFS1 images, two
# of them not cleanly unmounted), taken from its source package on PyPI.
# For each: `ufskit extract` must equal what a read-only mount shows
# (names, types, modes, sizes, mtimes, symlink targets, bytes); an image
# that is not clean must be read with a warning; the image must not
# change.
#
# usage: scripts/freebsd-images.sh [WORKDIR]   (as root: it mounts)
set -euo pipefail
cd "$(dirname "$0")/.."
U=$PWD/target/release/ufskit
[ -x "$U" ] || cargo build --release -q -p ufskit
w=${1:-$(mktemp -d "${TMPDIR:-/tmp}/ufskit-freebsd-images.XXXXXX")}
mkdir -p "$w/mnt"
cleanup() { mountpoint -q "$w/mnt" && $U umount "$w/mnt"; true; }
trap cleanup EXIT
if [ ! -d "$w/venv" ]; then python3 -m venv "$w/venv"; fi
"$w/venv/bin/pip" download -q --no-deps --no-binary :all: -d "$w" dissect.ffs
tar -C "$w" -xzf "$(ls "$w"/dissect_ffs-*.tar.gz | tail -1)"
# What a tree shows: path, type, mode (a Linux symlink's is always 777,
# FreeBSD keeps the umask's), size (files), mtime, link target.
listing() {
  (cd "$1" && find . ! -type l -printf '%p %y %m %T@\n' && find . -type l -printf '%p %y %T@ %l\n' \
    && find . -type f -printf '%p %s\n') | sort
}
n=0
for gz in "$w"/dissect_ffs-*/tests/data/*.bin.gz; do
  img=$w/$(basename "$gz" .gz)
  gunzip -c "$gz" > "$img"
  before=$(sha256sum < "$img")
  rm -rf "$w/out"
  $U extract -q "$img" "$w/out" 2> "$w/err"
  if $U fsck -n "$img" > /dev/null 2>&1; then
    ! grep -q "not cleanly unmounted" "$w/err" || { echo "$img: clean, yet extract warned" >&2; exit 1; }
  else
    grep -q "not cleanly unmounted" "$w/err" || { echo "$img: not clean, and extract did not say so" >&2; exit 1; }
  fi
  [ "$(sha256sum < "$img")" = "$before" ] || { echo "$img: extract changed the image" >&2; exit 1; }
  $U mount -o ro "$img" "$w/mnt"
  diff -r --no-dereference "$w/mnt" "$w/out"
  diff <(listing "$w/mnt") <(listing "$w/out")
  $U umount "$w/mnt"
  [ "$(sha256sum < "$img")" = "$before" ] || { echo "$img: the read-only mount changed the image" >&2; exit 1; }
  echo "$(basename "$img"): extract equals the read-only mount ($(listing "$w/out" | wc -l) lines compared)"
  n=$((n + 1))
done
[ "$n" -ge 4 ] || { echo "expected 4 FreeBSD-made images, found $n" >&2; exit 1; }
