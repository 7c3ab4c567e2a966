#!/usr/bin/env bash
# Installs ufskit: the binary (cargo install), a manual page per
# subcommand (`man ufskit-mount`), bash completion, and the name mount(8)
# needs for `mount -t fuse.ufskit` and /etc/fstab lines of that type
# (mount.fuse3, from Debian's fuse3, runs `ufskit IMAGE DIR -o OPTS`).
# usage: scripts/install.sh [PREFIX]   (default /usr/local; as root for it)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=${1:-/usr/local}
cargo install --locked --quiet --path crates/ufskit --root "$prefix"
bin=$prefix/bin/ufskit
man=$prefix/share/man/man1
"$bin" man "$man" >/dev/null
comp=$prefix/share/bash-completion/completions
mkdir -p "$comp"
"$bin" completions bash > "$comp/ufskit"
command -v mandb >/dev/null 2>&1 && mandb -q "$prefix/share/man" 2>/dev/null || true
echo "installed $bin ($("$bin" --version))"
echo "manual pages in $man (man ufskit, man ufskit-mount, ...)"
echo "bash completion in $comp/ufskit"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "note: $prefix/bin is not on PATH; mount -t fuse.ufskit needs ufskit there" ;;
esac
command -v mount.fuse3 >/dev/null 2>&1 || [ -x /sbin/mount.fuse3 ] ||
  echo "note: mount.fuse3 (Debian's fuse3) is needed for mount -t fuse.ufskit and fstab"
