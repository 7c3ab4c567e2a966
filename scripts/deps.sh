#!/usr/bin/env bash
# Installs what the build and the tests need on Debian: Rust's toolchain is
# expected (rustup); system packages come from apt when missing.
set -euo pipefail
need=()
command -v makefs >/dev/null 2>&1 || [ -x /usr/sbin/makefs ] || need+=(makefs)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
command -v stress-ng >/dev/null 2>&1 || need+=(stress-ng)
# Whole-disk images with partition tables (the partition tests).
command -v sgdisk >/dev/null 2>&1 || [ -x /usr/sbin/sgdisk ] || need+=(gdisk)
# Extended attributes through the mount (setfattr, getfattr).
command -v setfattr >/dev/null 2>&1 || need+=(attr)
command -v setfacl >/dev/null 2>&1 || need+=(acl)
command -v mkfs.ext4 >/dev/null 2>&1 || [ -x /usr/sbin/mkfs.ext4 ] || need+=(e2fsprogs)
# fallocate and SEEK_DATA through the mount (xfs_io), as xfstests drives them.
command -v xfs_io >/dev/null 2>&1 || [ -x /usr/sbin/xfs_io ] || need+=(xfsprogs)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
# An NFS export of the mount over loopback: NFS-Ganesha (user-space server,
# VFS back end by file handles) and libnfs's client tools.
command -v ganesha.nfsd >/dev/null 2>&1 || need+=(nfs-ganesha nfs-ganesha-vfs)
[ -e /usr/lib/x86_64-linux-gnu/ganesha/libfsalvfs.so ] || [ -n "$(ls /usr/lib/*/ganesha/libfsalvfs.so 2>/dev/null)" ] || need+=(nfs-ganesha-vfs)
command -v nfs-cat >/dev/null 2>&1 || need+=(libnfs-utils)
command -v bonnie++ >/dev/null 2>&1 || [ -x /usr/sbin/bonnie++ ] || need+=(bonnie++)
command -v postmark >/dev/null 2>&1 || need+=(postmark)
command -v folder >/dev/null 2>&1 || [ -x /usr/bin/mh/folder ] || need+=(nmh)
# The mount evaluation's Andrew and build workloads compile C.
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v ar >/dev/null 2>&1 || need+=(binutils)
# Plots and analysis use Debian's matplotlib, pandas and statsmodels (system python3).
/usr/bin/python3 -c 'import matplotlib, pandas, statsmodels' >/dev/null 2>&1 || need+=(python3-matplotlib python3-pandas python3-statsmodels)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "installing: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
  else
    echo "missing packages (install as root): ${need[*]}" >&2
  fi
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust (https://rustup.rs)" >&2
  exit 1
fi
# The formatting and lint checks (rustup's default profile has them; a
# minimal one not).
if ! cargo fmt --version >/dev/null 2>&1; then
  command -v rustup >/dev/null 2>&1 && rustup component add rustfmt >/dev/null 2>&1 || true
fi
if ! cargo clippy --version >/dev/null 2>&1; then
  command -v rustup >/dev/null 2>&1 && rustup component add clippy >/dev/null 2>&1 || true
fi
# FUSE over io_uring (Linux 6.14+) is offered by the kernel only while the
# fuse module's enable_uring switch is on. A mount's defaults leave that
# machine-wide switch alone (-o uring=on turns it on); the tests and the
# benchmarks exercise the io_uring transport, so running them turns it on,
# as installing their packages does, and says so.
param=/sys/module/fuse/parameters/enable_uring
if [ -w "$param" ] && [ "$(cat "$param")" != Y ] && [ "$(id -u)" = 0 ]; then
  echo Y > "$param" && echo "turned on FUSE over io_uring for this machine (fuse.enable_uring=Y)"
fi
