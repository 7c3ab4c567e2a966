#!/usr/bin/env bash
# Installs ufskit: the binary (cargo install), a manual page per
# subcommand (`man ufskit-mount`), bash completion, and the name mount(8)
# looks for by the mount's type, fuse.ufskit: /sbin/mount.fuse.ufskit
# (mounts, fstab lines, `mount -o remount,ro`), and mkfs(8)'s and fsck(8)'s
# for the same type: /sbin/mkfs.fuse.ufskit, /sbin/fsck.fuse.ufskit. Without it mount.fuse3,
# from Debian's fuse3, runs `ufskit IMAGE DIR -o OPTS`, which works too.
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
# libmount looks for helpers in /sbin (and /sbin/fs.d, /sbin/fs) only.
if [ -w /sbin ]; then
  for h in mount mkfs fsck; do ln -sf "$bin" /sbin/$h.fuse.ufskit; done
  echo "mount(8), mkfs(8) and fsck(8) helpers: /sbin/{mount,mkfs,fsck}.fuse.ufskit"
  # fsck(8) picks its helper by the type blkid finds on the device, "ufs",
  # even when told `-t fuse.ufskit`. Another fsck.ufs (ufsutils') is kept.
  if [ ! -e /sbin/fsck.ufs ] || [ "$(readlink -f /sbin/fsck.ufs)" = "$(readlink -f "$bin")" ]; then
    ln -sf "$bin" /sbin/fsck.ufs
    echo "fsck(8) helper for blkid's type ufs: /sbin/fsck.ufs"
  else
    echo "note: /sbin/fsck.ufs is another program's; fsck(8) of a UFS device runs it, not ufskit"
  fi
else
  echo "note: run as root to install /sbin/{mount,mkfs,fsck}.fuse.ufskit"
fi
# mount(8) starts its helpers without the caller's PATH; mount.fuse3 then
# finds ufskit through /bin/sh's default path only.
case ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:" in
  *":$prefix/bin:"*) ;;
  *) echo "note: mount -t fuse.ufskit and fstab lines find ufskit only in /usr/local/bin, /usr/bin and the sbin directories, not in $prefix/bin" ;;
esac
command -v mount.fuse3 >/dev/null 2>&1 || [ -x /sbin/mount.fuse3 ] ||
  echo "note: mount.fuse3 (Debian's fuse3) is needed for mount -t fuse.ufskit and fstab"
# FUSE over io_uring, which ufskit's mounts use when the kernel offers it:
# the fuse module's machine-wide switch, left alone by a mount unless it is
# told -o uring=on. Installing as root is the administrator asking.
param=/sys/module/fuse/parameters/enable_uring
if [ -e "$param" ]; then
  if [ "$(cat "$param")" = Y ]; then
    echo "FUSE over io_uring: on (fuse.enable_uring=Y)"
  elif [ -w "$param" ] && echo Y > "$param" 2>/dev/null; then
    echo "FUSE over io_uring: turned on (fuse.enable_uring=Y) until the next boot; to keep it, add fuse.enable_uring=1 to the kernel command line (or 'options fuse enable_uring=1' in /etc/modprobe.d/ when fuse is a module)"
  else
    echo "note: FUSE over io_uring is off (fuse.enable_uring=N): mounts use /dev/fuse, slower; as root: echo Y > $param"
  fi
fi
