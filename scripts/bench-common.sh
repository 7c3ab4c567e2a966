# Shared by the benchmark scripts (sourced, not run).
#
# start_hogs: with UFSKIT_BUSY=1, a CPU hog on every CPU for the rest of
# the run (their pids in the array `hogs`, which the script's cleanup
# kills with stop_hogs) and machine=busy; otherwise machine=quiet.
start_hogs() {
  machine=quiet
  hogs=()
  if [ "${UFSKIT_BUSY:-0}" = 1 ]; then
    machine=busy
    for _ in $(seq "$(nproc)"); do
      ( while :; do :; done ) &
      hogs+=($!)
    done
  fi
}

stop_hogs() {
  for h in "${hogs[@]}"; do kill "$h" 2>/dev/null || true; done
}

# For scripts with one ufskit mount at $work/ufs (binary $U) and ext4 at
# $work/ext4: on exit (any exit), the hogs stopped, both unmounted and
# $work removed.
cleanup_ufs_and_ext4() {
  stop_hogs
  mountpoint -q "$work/ufs" && { $U umount "$work/ufs" || umount -l "$work/ufs"; } || true
  mountpoint -q "$work/ext4" && umount "$work/ext4" || true
  rm -rf "$work"
}
