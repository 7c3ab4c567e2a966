#!/usr/bin/env bash
# Seed 001's benchmark (Lukas Czerner's script, linux-ext4, March 2012) with
# the real tools through real mounts: N files of 4096 bytes with random
# names in one directory, then `ls`, `tar -cf -`, `find -type f`,
# `cp -a DIR copy` and `rm -rf DIR`, each after `sync; echo 3 >
# /proc/sys/vm/drop_caches`, side by side in one run on
#   ufskit-off     ufskit -o disk=dtla-307045,inodeorder=off    (FFS's own inode policy)
#   ufskit-offset  ufskit -o disk=dtla-307045,inodeorder=offset (inode order follows readdir; the default)
#                  (both also -o seed=S, see UFSKIT_SEED)
#   ext4           the kernel's ext4 on a loop device (the standing peer)
# Writes results/largedir-mount.json and prints a table.
#
# usage: scripts/bench-largedir-mount.sh [N ...]   (as root; default 10000 50000)
# env:   UFSKIT_CHURN=0|1|both   0 (default): fresh directories only; 1: churned
#                                only (after creating, delete half the files at
#                                random and create as many new ones, then run the
#                                steps); both: fresh and churned in one run.
#        UFSKIT_TOOLS=DIR        where corr.py lives (default ../shared/tools)
#        UFSKIT_MOUNT_OPTS=OPTS  extra ufskit mount options, appended to both
#                                ufskit mounts (e.g. cache=256M, disk_sleep=on)
#        UFSKIT_SEED=S           seed (default 1) of the file names (the three
#                                file systems get the same names), of ufskit's
#                                newfs (--seed) and of its allocator's choices
#                                (mount -o seed=S): ufskit's modeled figures
#                                repeat exactly from run to run
#
# Procedure, per N, state (fresh/churned) and file system, in that order
# (the file systems alternate per N and state):
# - a fresh file system on a fresh sparse image, the same size for all
#   three: room for 2×N files of 4 KB and metadata, at least 4 GiB, at
#   most the modeled drive (42 GiB). ufskit: `newfs -i 4096 --seed S` (the
#   density of `ufskit bench largedir`); ext4: `mkfs.ext4 -q -F -E
#   lazy_itable_init=0` on a loop device (`-N` only if its default density
#   would not hold 2×N files).
# - create (a Python stand-in for the seed's `dirtest`: 16 hex digit random
#   names, O_CREAT|O_EXCL, one 4096-byte write each); churn (when asked): the
#   names sorted, shuffled by the seed, half unlinked, as many new ones made.
# - readdir locality of the directory through the mount, after creating
#   and churning: `corr.py DIR` (fraction of adjacent readdir entries whose
#   inode numbers increase: 0.5 random, 1.0 perfect); also of the copy after
#   `cp -a` (JSON only).
# - each step (create and churn included) starts cold: for ufskit
#   `sync MOUNT` first (an fsync of the mount's root: the kernel's plain
#   `sync` is not passed on to FUSE, an fsync makes the daemon write every
#   dirty block), then SIGUSR1 to the daemon (it drops its clean blocks)
#   and a wait until `ufskit stats` shows its cache empty; then, for all,
#   `sync; echo 3 > /proc/sys/vm/drop_caches`. The `ufskit stats` call
#   that confirms the drop reads the root's inode block, which therefore
#   stays cached into the step (one block).
# - wall seconds: the command alone, as the seed's `time` (its trailing
#   sync is recorded apart as sync_s in the JSON). `tar -cf - DIR | cat >
#   /dev/null`: with its archive on /dev/null GNU tar would skip reading
#   the files' data, so it goes through cat. ufskit's wall time is its
#   FUSE and CPU path plus the host's real reads of the image file: the
#   modeled disk only counts (no disk_sleep unless UFSKIT_MOUNT_OPTS asks).
#   The mounts keep ufskit's defaults (cache=64M, readahead=128k: every
#   small-block miss reads 128 KiB); `ufskit bench largedir` models 256 MiB
#   of cache and no read-ahead (UFSKIT_MOUNT_OPTS=cache=256M,readahead=0).
# - modeled seconds (ufskit): `disk.busy_ms` of `ufskit stats --json`
#   after the step and its flush (`sync MOUNT; sync`) minus the same
#   before the step (taken once the daemon's cache is cold).
# - after unmounting, `ufskit fsck -n` (ext4: `e2fsck -fn`) must find the
#   file system clean, or the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
me=bench-largedir-mount.sh
die() { echo "$me: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (loop device for the ext4 peer, drop_caches)"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 50000)
for n in "${sizes[@]}"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] && [ "$n" -ge 2 ] || { echo "$me: N must be an integer of at least 2: $n" >&2; exit 2; }
done
churn=${UFSKIT_CHURN:-0}
case $churn in
  0 | fresh) states=(fresh) ;;
  1 | churned) states=(churned) ;;
  both) states=(fresh churned) ;;
  *) echo "$me: UFSKIT_CHURN must be 0, 1 or both: $churn" >&2; exit 2 ;;
esac
seed=${UFSKIT_SEED:-1}
[[ $seed =~ ^[0-9]+$ ]] || { echo "$me: UFSKIT_SEED must be a non-negative integer: $seed" >&2; exit 2; }
extra=${UFSKIT_MOUNT_OPTS:-}
tools=${UFSKIT_TOOLS:-../shared/tools}
corr=$(realpath -e "$tools/corr.py" 2>/dev/null) ||
  die "$tools/corr.py not found (set UFSKIT_TOOLS=dir)"
disk=dtla-307045
disk_gib=42          # 90,069,840 sectors of 512 bytes: the modeled drive holds 42.9 GiB
file_bytes=4096
# Image size for N: twice the files (the directory and its copy) at 4 KB
# plus a fragment's worth of metadata each, half again as slack, plus
# 512 MiB, in whole GiB, at least 4 GiB (as `ufskit bench largedir`).
image_gib() {
  local g=$(( ($1 * 2 * (file_bytes + 1024) * 3 / 2 + (512 << 20) + (1 << 30) - 1) >> 30 ))
  echo $(( g < 4 ? 4 : g ))
}
for n in "${sizes[@]}"; do
  g=$(image_gib "$n")
  [ "$g" -le $disk_gib ] || die "N=$n needs a ${g} GiB image, more than the modeled $disk drive holds ($disk_gib GiB)"
done
scripts/deps.sh
for c in python3 tar cp find losetup mkfs.ext4 e2fsck mountpoint pgrep; do
  command -v "$c" >/dev/null || die "$c is needed"
done
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
out=$PWD/results/largedir-mount.json
work=$(mktemp -d /tmp/ufskit-largedir.XXXXXX)
cur_ufs=""    # mounted ufskit mount point, if any
cur_ext4=""   # mounted ext4 mount point, if any
cur_loop=""   # attached loop device, if any
cleanup() {
  set +e
  if [ -n "$cur_ufs" ] && mountpoint -q "$cur_ufs"; then
    $U umount "$cur_ufs" || fusermount3 -uz "$cur_ufs" || umount -l "$cur_ufs"
  fi
  if [ -n "$cur_ext4" ] && mountpoint -q "$cur_ext4"; then
    umount "$cur_ext4" || umount -l "$cur_ext4"
  fi
  # After a lazy unmount, -d leaves the device to go once it is free.
  [ -n "$cur_loop" ] && losetup -d "$cur_loop"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The seed's dirtest (create) and the churn, with names from the seed.
cat >"$work/files.py" <<'EOF'
import os, random, sys
SIZE = 4096
DATA = bytes(range(256)) * (SIZE // 256)
def make(d, rng, n):
    made = 0
    while made < n:
        name = "%016x" % rng.getrandbits(64)
        try:
            fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            if os.write(fd, DATA) != SIZE:
                sys.exit("short write to %s" % name)
        finally:
            os.close(fd)
        made += 1
mode, d, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "create":
    make(d, random.Random(seed), int(sys.argv[4]))
elif mode == "churn":
    rng = random.Random(seed * 1000003 + 7)
    names = sorted(os.listdir(d))
    rng.shuffle(names)
    gone = names[:len(names) // 2]
    for name in gone:
        os.unlink(os.path.join(d, name))
    make(d, rng, len(gone))
else:
    sys.exit("files.py: unknown mode %s" % mode)
EOF

# Records steps and facts as JSON lines, checks ufskit stats, rewrites the
# JSON (atomically) and prints the table.
cat >"$work/report.py" <<'EOF'
import json, os, sys
STEPS = ["create", "churn", "ls", "tar", "find", "cp -a", "rm -rf"]
FS = ["ufskit-off", "ufskit-offset", "ext4"]
def load(p):
    with open(p) as f:
        return json.load(f)
def disk_diff(a, b):
    da, db = a["disk"], b["disk"]
    return {k: db[k] - da[k] for k in db if isinstance(db[k], (int, float))}
cmd = sys.argv[1]
if cmd == "cached":                      # stats.json -> bytes in the daemon's cache
    print(load(sys.argv[2])["cache"]["bytes_cached"])
elif cmd == "check":                     # stats.json disk order
    s, disk, order = load(sys.argv[2]), sys.argv[3], sys.argv[4]
    if s.get("disk_model") != disk or s.get("inode_order") != order:
        sys.exit("mount has disk model %r and inode order %r, expected %r and %r (check UFSKIT_MOUNT_OPTS)"
                 % (s.get("disk_model"), s.get("inode_order"), disk, order))
elif cmd == "step":                      # raw fs n state step t0 t1 t2 [before after]
    raw, fs, n, state, step, t0, t1, t2 = sys.argv[2:10]
    rec = {"kind": "step", "fs": fs, "n": int(n), "state": state, "step": step,
           "wall_s": float(t1) - float(t0), "sync_s": float(t2) - float(t1)}
    if len(sys.argv) > 11:
        d = disk_diff(load(sys.argv[10]), load(sys.argv[11]))
        rec["modeled_ms"] = d["busy_ms"]
        rec["disk"] = d
    with open(raw, "a") as f:
        f.write(json.dumps(rec) + "\n")
    m = " %.3f s modeled (%d requests, %d seeks)" % (rec["modeled_ms"] / 1e3, d["requests"], d["seeks"]) if "modeled_ms" in rec else ""
    print("  %-7s %8.3f s wall%s" % (step, rec["wall_s"], m), flush=True)
elif cmd == "fact":                      # raw fs n state key value  (value: JSON, or a file with @)
    raw, fs, n, state, key, value = sys.argv[2:8]
    v = load(value[1:]) if value.startswith("@") else json.loads(value)
    with open(raw, "a") as f:
        f.write(json.dumps({"kind": "fact", "fs": fs, "n": int(n), "state": state, key: v}) + "\n")
elif cmd == "write":                     # raw out meta.json [table]
    raw, out, meta = sys.argv[2:5]
    runs, order = {}, []
    with open(raw) as f:
        for line in f:
            r = json.loads(line)
            key = (r["n"], r["state"], r["fs"])
            if key not in runs:
                runs[key] = {"n": r["n"], "state": r["state"], "fs": r["fs"], "steps": []}
                order.append(key)
            run = runs[key]
            if r["kind"] == "step":
                s = {k: r[k] for k in ("step", "wall_s", "sync_s", "modeled_ms", "disk") if k in r}
                s["name"] = s.pop("step")
                run["steps"].append(s)
            else:
                run.update((k, v) for k, v in r.items() if k not in ("kind", "fs", "n", "state"))
    doc = load(meta)
    doc["runs"] = [runs[k] for k in order]
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, out)
    if len(sys.argv) < 6:
        sys.exit(0)
    cols = [s for s in STEPS if any(st["name"] == s for r in runs.values() for st in r["steps"])]
    def cell(run, step, what):
        st = next((s for s in run["steps"] if s["name"] == step), None)
        if st is None or (what == "modeled" and "modeled_ms" not in st):
            return "-"
        return "%.3f" % (st["wall_s"] if what == "wall" else st["modeled_ms"] / 1e3)
    head = "%-7s %-14s %-8s %-8s" % ("N", "fs", "state", "seconds") + "".join("%9s" % c for c in cols) + "%10s" % "locality"
    print("\n" + head)
    print("-" * len(head))
    def state_rank(s):
        return ["fresh", "churned"].index(s) if s in ("fresh", "churned") else 9
    keys = sorted(runs, key=lambda k: (k[0], state_rank(k[1]), FS.index(k[2]) if k[2] in FS else 9))
    for k in keys:
        r = runs[k]
        loc = r.get("locality", {}).get("name_to_inode")
        print("%-7d %-14s %-8s %-8s" % (r["n"], r["fs"], r["state"], "wall") +
              "".join("%9s" % cell(r, c, "wall") for c in cols) +
              "%10s" % ("%.4f" % loc if loc is not None else "-"))
        if r["fs"].startswith("ufskit"):
            print("%-7s %-14s %-8s %-8s" % ("", "", "", "modeled") + "".join("%9s" % cell(r, c, "modeled") for c in cols))
    # modeled disk time, inodeorder=offset against off, per N and state
    pairs = sorted({(k[0], k[1]) for k in runs}, key=lambda p: (p[0], state_rank(p[1])))
    lines = []
    for n, state in pairs:
        a, b = runs.get((n, state, "ufskit-offset")), runs.get((n, state, "ufskit-off"))
        if not a or not b:
            continue
        def ms(run, c):
            st = next((s for s in run["steps"] if s["name"] == c), None)
            return st.get("modeled_ms") if st else None
        cells = []
        for c in cols:
            x, y = ms(a, c), ms(b, c)
            cells.append("%.2f" % (x / y) if x is not None and y else "-")
        lines.append("%-7d %-14s %-8s %-8s" % (n, "offset/off", state, "modeled") + "".join("%9s" % c for c in cells))
    if lines:
        print("\nufskit modeled disk time, inodeorder=offset / inodeorder=off")
        print("\n".join(lines))
else:
    sys.exit("report.py: unknown command %s" % cmd)
EOF
report() { python3 "$work/report.py" "$@"; }
now() { date +%s.%N; }

: >"$work/raw"
python3 - "$work/meta.json" "$disk" "$extra" "$seed" "$churn" "$file_bytes" "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)" "$(uname -r)" "${sizes[@]}" <<'EOF'
import json, sys, time
p, disk, extra, seed, churn, fb, rev, kernel, *sizes = sys.argv[1:]
json.dump({"workload": "seed 001: N files of 4 KB in one directory; ls, tar, find, cp -a, rm -rf from a cold cache",
           "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "git": rev, "kernel": kernel,
           "disk_model": disk, "extra_mount_opts": extra, "seed": int(seed), "churn": churn,
           "file_bytes": int(fb), "sizes": [int(s) for s in sizes],
           "fs": {"ufskit-off": "ufskit newfs -i 4096 --seed %s; mount -o disk=%s,inodeorder=off,seed=%s" % (seed, disk, seed),
                  "ufskit-offset": "ufskit newfs -i 4096 --seed %s; mount -o disk=%s,inodeorder=offset,seed=%s" % (seed, disk, seed),
                  "ext4": "mkfs.ext4 -E lazy_itable_init=0, loop device"},
           "units": "wall_s, sync_s: seconds on the host; modeled_ms: disk.busy_ms of the modeled drive"},
          open(p, "w"), indent=1)
EOF

# State of the file system under test, set by setup_*.
fs=""; mnt=""; img=""; daemon=""

setup_ufs() {  # ORDER GIB
  local order=$1 gib=$2 o="disk=$disk,inodeorder=$1,seed=$seed${extra:+,$extra}"
  fs=ufskit-$order; mnt=$work/mnt-$fs; img=$work/$fs.img
  mkdir -p "$mnt"
  $U newfs -i 4096 --seed "$seed" -s "${gib}g" "$img" >/dev/null || die "newfs of a ${gib} GiB image failed"
  $U mount -o "$o" "$img" "$mnt" || die "ufskit mount -o $o failed"
  cur_ufs=$mnt
  local pids
  pids=$(pgrep -f "ufskit mount -f .* $mnt\$" || true)
  [ "$(echo "$pids" | grep -c .)" = 1 ] || die "cannot find the one ufskit daemon of $mnt (found: ${pids:-none})"
  daemon=$pids
  $U stats --json "$mnt" >"$work/stats.json"
  report check "$work/stats.json" "$disk" "$order" || die "wrong mount options"
}

setup_ext4() {  # GIB N
  local gib=$1 n=$2 need iopt=()
  fs=ext4; mnt=$work/mnt-ext4; img=$work/ext4.img
  mkdir -p "$mnt"
  truncate -s "${gib}G" "$img"
  cur_loop=$(losetup -f --show "$img") || die "losetup failed"
  # The default density (one inode per 16 KiB) is kept when it holds 2×N files.
  need=$((2 * n + 10000))
  [ $(((gib << 30) / 16384)) -ge $need ] || iopt=(-N "$need")
  mkfs.ext4 -q -F -E lazy_itable_init=0 "${iopt[@]}" "$cur_loop" || die "mkfs.ext4 failed"
  mount "$cur_loop" "$mnt" || die "mounting ext4 failed"
  cur_ext4=$mnt
}

teardown() {
  if [ "$fs" = ext4 ]; then
    umount "$mnt"; cur_ext4=""
    e2fsck -fn "$cur_loop" >"$work/fsck.out" 2>&1 || { cat "$work/fsck.out" >&2; die "e2fsck: ext4 is not clean"; }
    losetup -d "$cur_loop"; cur_loop=""
    echo "  e2fsck -fn: clean"
  else
    $U umount "$mnt" || die "ufskit umount $mnt failed"
    cur_ufs=""
    $U fsck -n "$img" >"$work/fsck.out" 2>&1 || { cat "$work/fsck.out" >&2; die "ufskit fsck: $fs is not clean"; }
    echo "  ufskit fsck -n: $(tail -1 "$work/fsck.out")"
    report fact "$work/raw" "$fs" "$n" "$state" fsck "$(tail -1 "$work/fsck.out" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))')"
  fi
  rm -f "$img"
}

# Empties the daemon's cache (its dirty blocks were written by the caller's
# `sync MOUNT`) and leaves in $1 the stats taken once it is cold.
ufs_cold() {
  local i
  kill -USR1 "$daemon" || die "cannot signal the ufskit daemon ($daemon)"
  for i in $(seq 200); do
    $U stats --json "$mnt" >"$1"
    [ "$(report cached "$1")" -le 65536 ] && return 0
    sleep 0.05
  done
  die "the ufskit daemon of $mnt did not drop its cache after SIGUSR1"
}

step() {  # NAME COMMAND...
  local name=$1 t0 t1 t2 stats=()
  shift
  if [ "$fs" != ext4 ]; then
    sync "$mnt"
    ufs_cold "$work/before.json"
  fi
  sync; echo 3 >/proc/sys/vm/drop_caches
  t0=$(now)
  "$@"
  t1=$(now)
  [ "$fs" = ext4 ] || sync "$mnt"
  sync
  t2=$(now)
  if [ "$fs" != ext4 ]; then
    $U stats --json "$mnt" >"$work/after.json"
    stats=("$work/before.json" "$work/after.json")
  fi
  report step "$work/raw" "$fs" "$n" "$state" "$name" "$t0" "$t1" "$t2" "${stats[@]}"
}

locality() {  # DIR KEY
  local line
  line=$(python3 "$corr" "$1") || die "corr.py $1 failed"
  [[ $line =~ entries=([0-9]+)\ name_to_inode=([0-9.]+) ]] || die "corr.py printed: $line"
  echo "  $2: $line"
  report fact "$work/raw" "$fs" "$n" "$state" "$2" "{\"entries\": ${BASH_REMATCH[1]}, \"name_to_inode\": ${BASH_REMATCH[2]}}"
}

do_create() { python3 "$work/files.py" create "$d" "$seed" "$n"; }
do_churn() { python3 "$work/files.py" churn "$d" "$seed"; }
do_ls() { ls "$d" >/dev/null; }
do_tar() { tar -C "$mnt" -cf - test | cat >/dev/null; }
do_find() { find "$d" -type f >/dev/null; }
do_cp() { cp -a "$d" "$mnt/copy"; }
do_rm() { rm -rf "$d"; }

echo "sizes: ${sizes[*]}; states: ${states[*]}; ufskit: -o disk=$disk,inodeorder=off|offset,seed=$seed${extra:+,$extra}; corr.py: $corr"
for n in "${sizes[@]}"; do
  gib=$(image_gib "$n")
  for state in "${states[@]}"; do
    for which in off offset ext4; do
      if [ $which = ext4 ]; then setup_ext4 "$gib" "$n"; else setup_ufs "$which" "$gib"; fi
      echo "$fs N=$n $state (${gib} GiB image)"
      ifree=$(df --output=iavail "$mnt" | tail -1 | tr -d ' ')
      [ "$ifree" -ge $((2 * n + 2)) ] || die "$fs has $ifree free inodes, N=$n needs $((2 * n + 2))"
      d=$mnt/test
      mkdir "$d"
      step create do_create
      [ "$state" = churned ] && step churn do_churn
      entries=$(find "$d" -mindepth 1 -maxdepth 1 | wc -l)
      [ "$entries" = "$n" ] || die "$fs: $d holds $entries entries, expected $n"
      locality "$d" locality
      if [ "$fs" != ext4 ]; then
        $U stats --json "$mnt" >"$work/stats.json"
        python3 -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))["placement"], open(sys.argv[2], "w"))' \
          "$work/stats.json" "$work/placement.json"
        report fact "$work/raw" "$fs" "$n" "$state" placement "@$work/placement.json"
      fi
      step ls do_ls
      step tar do_tar
      step find do_find
      step "cp -a" do_cp
      locality "$mnt/copy" copy_locality
      step "rm -rf" do_rm
      teardown
      report write "$work/raw" "$out" "$work/meta.json"
    done
  done
done
report write "$work/raw" "$out" "$work/meta.json" table
echo
echo "wrote $out"
