#!/bin/bash
# The procedure of ../shared/tools/peer-tree.sh (extract, find, rm -rf, with
# caches dropped between steps), plus: if UFSKIT_DROP is set, that command
# runs after each kernel cache drop, so a ufskit daemon drops its own buffer
# cache too. usage: peer-tree.sh MOUNTDIR TARBALL
set -e
M=$1; T=$2
export TIMEFORMAT=%3R
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; if [ -n "${UFSKIT_DROP:-}" ]; then $UFSKIT_DROP >/dev/null; fi; }
drop
x=$( { time tar -xf $T -C $M ; } 2>&1 )
drop
f=$( { time find $M -type f >/dev/null ; } 2>&1 )
drop
r=$( { time rm -rf $M/* ; } 2>&1 )
echo "extract=$x find=$f rm=$r"
