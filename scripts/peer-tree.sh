#!/bin/bash
# The procedure of ../shared/tools/peer-tree.sh (extract, find, rm -rf, with
# caches dropped between steps), plus: if UFSKIT_DROP is set, that command
# runs before each kernel cache drop, so a ufskit daemon writes and drops
# its own buffer cache too, and what it wrote leaves the host's page cache
# with the rest. usage: peer-tree.sh MOUNTDIR TARBALL
set -e
M=$1; T=$2
export TIMEFORMAT=%3R
drop() { if [ -n "${UFSKIT_DROP:-}" ]; then $UFSKIT_DROP >/dev/null; fi; sync; echo 3 > /proc/sys/vm/drop_caches; }
drop
x=$( { time tar -xf $T -C $M ; } 2>&1 )
drop
f=$( { time find $M -type f >/dev/null ; } 2>&1 )
drop
r=$( { time rm -rf $M/* ; } 2>&1 )
echo "extract=$x find=$f rm=$r"
