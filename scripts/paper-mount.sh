#!/usr/bin/env bash
# The paper's evaluation with real programs through the FUSE mount: under
# each of the 16 combinations of soft updates (softdep/normal), dirpref
# (orlov/traditional), vmiodir (on/off) and dirhash (2 MiB/off), on a fresh
# image each time: tar extract of a real tree, find -print, rm -rf;
# bonnie++'s small-file tests (-s 0 -n N: sequential and random create,
# stat, delete); postmark 1.5 with its default file sizes; the MH folder
# (messages created in inbox order, nmh's folder -pack, rm -rf); the Andrew
# benchmark; a build standing in for buildworld. Wall-clock seconds of this
# machine (not the modeled 2002 machine of `ufskit bench paper`), repeated
# RUNS times because they vary; the CSV then goes through
# analysis/paper_stats.py and analysis/paper_report.py.
#
# andrew (seed 004, section 4.1), on a C tree generated once per script run
# outside the mount in the original's shape (69 files in 5 directories, 48
# of them .c that include <stdio.h>, <stdlib.h>, <string.h> and 1 to 5 of
# the tree's 16 headers, about 150 KB, Makefiles that build with gcc -O0
# and link a program): andrew-mkdir (mkdir -p of every copy's skeleton),
# andrew-copy (cp -r of the tree into each copy), andrew-stat (find -exec
# ls -l {} \; and du -s: an ls per entry, as the paper's find ran it),
# andrew-grep (grep -r -c '#include' and wc of every
# file), andrew-compile (make -j2 in the first copies: objects beside the
# sources, the program linked in the copy), andrew-remove (rm -rf).
# build (seed 004's buildworld: checkout, make, grep of the kernel, the
# object tree removed): build-checkout (tar -x of a generated src/ tree:
# include/ with 8 headers and directories under bin, sbin, lib, usr.bin and
# sys, each with its header and sources), build-compile (make -j2: every
# .c to obj/<dir>/<name>.o with gcc's temporaries in obj/tmp, each
# directory archived into lib<dir>.a), build-grep (grep -r '#include'
# src/sys), build-remove (rm -rf obj; src is then removed untimed).
# maildir (seed 002, scripts/paper_maildir.py): maildir-setup, -deliver,
# -imap, -poll, -remove, as the in-process workload. largedir (seed 001's
# script): largedir-create (files of 4 KB with random names in one
# directory), -ls (ls -l), -find, -remove, each from a cold cache.
# The daemon's cache is dropped (`ufskit stats --drop-caches`, which writes
# what is dirty and returns once the cache is empty) before every read-only
# test. Every phase checks what it left (directories, files, bytes, matches,
# objects, nothing after a removal) and stops the script otherwise.
#
# usage: scripts/paper-mount.sh [--quick] [--runs N] [--out DIR | --beside DIR] [--tree DIR]  (as root)
#   --beside DIR: DIR holds a `ufskit bench paper` run; the results go to
#   DIR/mount and DIR's report is written again with a section setting
#   them beside the model ("Through the mount, beside the model").
#   --quick: the tree /usr/include/linux, bonnie++ -n 1 (1,024 files),
#   postmark 1,000 files and transactions, a folder of 3,000 messages,
#   andrew 3 copies with the first compiled (48 .c), build 4 directories
#   of 4 .c (16 objects), 1 run; default: /usr/include, -n 16 (16,384
#   files, as the paper), postmark 10,000 files and transactions, the
#   paper's folder of 33,164 messages, andrew 10 copies all compiled (480
#   .c), build 24 directories of 12 .c (288 objects), 300 maildirs of 400
#   messages, a large directory of 20,000 files, 3 runs (quick: 4
#   maildirs of 300, 1,000 files).
# Needs cc, make and ar (gcc, make, binutils) besides scripts/deps.sh's
# (which installs nmh for folder).
# Every image is checked with `ufskit fsck -n` after its run; a finding
# stops the script (exit 1).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0 runs= out=results/paper-mount tree= beside=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1 ;;
    --runs) runs=$2; shift ;;
    --out) out=$2; shift ;;
    --beside) beside=$2; shift ;;
    --tree) tree=$2; shift ;;
    *) echo "usage: $0 [--quick] [--runs N] [--out DIR | --beside DIR] [--tree DIR]" >&2; exit 2 ;;
  esac
  shift
done
if [ -n "$beside" ]; then
  [ -f "$beside/paper.csv" ] || {
    echo "paper-mount.sh: --beside $beside: no paper.csv there (run ufskit bench paper --out $beside first)" >&2
    exit 2
  }
  out=$beside/mount
fi
[ "$(id -u)" = 0 ] || { echo "paper-mount.sh must run as root (FUSE mounts for bonnie++ -u root)" >&2; exit 1; }
if [ $quick = 1 ]; then
  bn=1 pm=1000 runs=${runs:-1} tree=${tree:-/usr/include/linux}
  ac=3 acc=1 bd=4 bf=4 mh=3000 md=4 mk=300 ld=1000
else
  bn=16 pm=10000 runs=${runs:-3} tree=${tree:-/usr/include}
  ac=10 acc=10 bd=24 bf=12 mh=33164 md=300 mk=400 ld=20000
fi
scripts/deps.sh
cargo build --release -q -p ufskit
U=$PWD/target/release/ufskit
BONNIE=$(command -v bonnie++ || echo /usr/sbin/bonnie++)
FOLDER=$(command -v folder || echo /usr/bin/mh/folder)
[ -x "$FOLDER" ] || { echo "paper-mount.sh: nmh's folder not found (apt-get install nmh)" >&2; exit 1; }
for p in cc make ar; do
  command -v $p >/dev/null || {
    echo "paper-mount.sh: $p not found: the andrew and build workloads compile C (apt-get install gcc make binutils)" >&2
    exit 1
  }
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/ufskit-paper-mount.XXXXXX)
cleanup() {
  mountpoint -q "$work/mnt" && $U umount "$work/mnt" || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/mnt"
tar -C "$(dirname "$tree")" -cf "$work/tree.tar" "$(basename "$tree")"
cat > "$work/gen.py" <<'PY'
# The andrew and build source trees: generated C (seeded, so every run of
# the script compiles the same text) that includes real system headers.
import math, os, random, sys
kind, top, n_a, n_b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rng = random.Random(4)

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)

def header(name, guard_extra=""):
    n = rng.randint(2, 8)
    g = name.upper().replace(".", "_").replace("/", "_")
    s = ["/* %s: generated */" % name, "#ifndef %s_" % g, "#define %s_" % g, ""]
    b = name.split(".")[0].replace("/", "_").replace("-", "_")
    s.append("#define %s_BASE %d" % (b.upper(), rng.randint(1, 99)))
    s.append("#define %s_LIMIT %d" % (b.upper(), rng.randint(1000, 99999)))
    s += ["", "struct %s_rec {" % b, "\tint a;", "\tlong b;", "\tchar name[%d];" % rng.choice([16, 32, 64]), "};", ""]
    s += ["static inline int %s_mix(int x)" % b, "{", "\treturn (x * %d) ^ (x >> %d);" % (rng.randint(3, 97), rng.randint(1, 7)), "}", ""]
    for k in range(n):
        s.append("#define %s_FLAG%d 0x%x" % (b.upper(), k, 1 << k))
    s += ["", "#endif", ""]
    return b, "\n".join(s)

def source(name, hdrs, main=False):
    # hdrs: (include line, base name) pairs; log-uniformly 1 to 24 functions.
    nf = int(math.exp(rng.uniform(math.log(2), math.log(40))))
    p = name.split("/")[-1].split(".")[0]
    s = ["/* %s: generated */" % name, "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>"]
    s += ['#include "%s"' % h for h, _ in hdrs] + [""]
    first = None
    for k in range(nf):
        b = rng.choice(hdrs)[1]
        first = first or b
        s += ["int %s_f%d(struct %s_rec *r, int n)" % (p, k, b), "{", "\tint i, s = %s_BASE;" % b.upper(), "",
              "\tfor (i = 0; i < n; i++)", "\t\ts += r->a * i + (int)strlen(r->name) + %d;" % rng.randint(0, 9),
              "\tif (s > %s_LIMIT)" % b.upper(), "\t\ts = %s_mix(s);" % b, "\tr->b += s;",
              '\tsnprintf(r->name, sizeof(r->name), "%s%%d", s);' % p, "\treturn s;", "}", ""]
    if main:
        b = first
        s += ["int main(int argc, char **argv)", "{", "\tstruct %s_rec r;" % b, "",
              "\tmemset(&r, 0, sizeof(r));", "\tr.a = argc;",
              '\tprintf("%%d\\n", %s_f0(&r, argc > 1 ? atoi(argv[1]) : 10));' % p, "\treturn 0;", "}", ""]
    return "\n".join(s)

if kind == "andrew":
    # The original tree's shape (seed 004, section 4.1; crates/ufs-bench/src/
    # paper/andrew.rs): a Makefile and a README, include/ (16 headers), lib/
    # (20 sources), src/ (20, main in s00.c), src/tools/ (8), a Makefile in
    # each source directory: 69 files, 48 of them .c.
    hs = []
    for i in range(16):
        b, t = header("h%02d.h" % i)
        write("%s/include/h%02d.h" % (top, i), t)
        hs.append(("h%02d.h" % i, b))
    sub = "OBJS = $(patsubst %.c,%.o,$(wildcard *.c))\n\nall: $(OBJS)\n\n%.o: %.c\n\t$(CC) $(CFLAGS) -c -o $@ $<\n"
    for d, p, n in (("lib", "l", 20), ("src", "s", 20), ("src/tools", "t", 8)):
        write("%s/%s/Makefile" % (top, d), "# %s: every .c to its .o\n" % d + sub)
        for i in range(n):
            name = "%s/%s%02d.c" % (d, p, i)
            write("%s/%s" % (top, name), source(name, rng.sample(hs, rng.randint(1, 5)), main=name == "src/s00.c"))
    write("%s/Makefile" % top,
          "# The Andrew tree: every directory's objects, then prog linked from them.\n"
          "CFLAGS = -O0 -I$(CURDIR)/include\nexport CFLAGS\n\nall: prog\n\n"
          "prog: objs\n\t$(CC) -o prog lib/*.o src/*.o src/tools/*.o\n\n"
          "objs:\n\t$(MAKE) -C lib\n\t$(MAKE) -C src\n\t$(MAKE) -C src/tools\n\n.PHONY: all objs\n")
    words = "the andrew file system benchmark copies this tree and compiles it".split()
    write("%s/README" % top, "\n".join(" ".join(rng.choice(words) for _ in range(12)) for _ in range(40)) + "\n")
else:
    # A src/ tree after FreeBSD's: include/ (8 shared headers), n_a program
    # and library directories over bin, sbin, lib, usr.bin and sys (the
    # kernel, which build-grep searches), each with its own header and n_b
    # sources; one Makefile that puts every object under ../obj and archives
    # each directory's objects into its lib<dir>.a.
    names = {"bin": "cat cp ls mv rm sh ln ps", "sbin": "fsck mount newfs init dump route",
             "lib": "libc libutil libm libz libkvm libedit", "usr.bin": "grep find make tar awk sed vi cut",
             "sys": "kern vm ufs net netinet dev"}
    areas = {a: v.split() for a, v in names.items()}
    dirs = []
    while len(dirs) < n_a:
        for a in ("sys", "lib", "bin", "usr.bin", "sbin"):
            if len(dirs) < n_a:
                k = sum(1 for d in dirs if d.startswith(a + "/"))
                nm = areas[a][k % len(areas[a])] + ("" if k < len(areas[a]) else str(k // len(areas[a])))
                dirs.append("%s/%s" % (a, nm))
    hs = []
    for i in range(8):
        b, t = header("sys%d.h" % i)
        write("%s/src/include/sys%d.h" % (top, i), t)
        hs.append(("sys%d.h" % i, b))
    mk = ["# Every .c to ../obj/<dir>/<name>.o, each directory archived into lib<dir>.a.",
          "OBJ ?= ../obj", "CFLAGS = -O0 -Iinclude", "", "LIBS ="]
    rules = []
    for d in dirs:
        leaf = d.split("/")[-1]
        b, t = header("%s.h" % leaf.replace(".", "_"))
        write("%s/src/%s/%s.h" % (top, d, leaf.replace(".", "_")), t)
        objs = []
        for i in range(n_b):
            name = "%s/%s%d.c" % (d, leaf.replace(".", "_"), i)
            own = ("%s.h" % leaf.replace(".", "_"), b)
            write("%s/src/%s" % (top, name), source(name, [own] + rng.sample(hs, rng.randint(1, 3))))
            objs.append("$(OBJ)/%s.o" % name[:-2])
        lib = "$(OBJ)/%s/%s.a" % (d, leaf if leaf.startswith("lib") else "lib" + leaf)
        mk.append("LIBS += " + lib)
        rules += ["%s: %s" % (lib, " ".join(objs)), "\t$(AR) rcs $@ $^", ""]
    mk += ["", "all: $(LIBS)", "", "$(OBJ)/%.o: %.c", "\t@mkdir -p $(@D)",
           "\t$(CC) $(CFLAGS) -I$(<D) -c -o $@ $<", ""] + rules
    write("%s/src/Makefile" % top, "\n".join(mk))
PY
python3 "$work/gen.py" andrew "$work/andrew" 0 0
python3 "$work/gen.py" build "$work/build" "$bd" "$bf"
tar -C "$work/build" -cf "$work/build.tar" src
# What the phases must leave, counted on the trees outside the mount.
addup() { awk -F: '{ s += $NF } END { print s + 0 }'; }
# N files of 4 KB with random names (16 hexadecimal digits) in the new
# directory DIR, from a fixed seed.
ld_create() {
  python3 - "$1" "$2" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
os.mkdir(d)
data = b"x" * 4095 + b"\n"
for _ in range(n):
    with open(os.path.join(d, "%016x" % rng.getrandbits(64)), "wb") as f:
        f.write(data)
PY
}
# An MH inbox of N messages in DIR, created in ascending number order: the
# numbers mostly consecutive with the gaps deleted messages left (a gap
# after 30% of them, of up to 5, one time in ten up to 200), 1 to 8 KiB of
# header and text each (log-uniform), from a fixed seed; as the in-process
# folder workload (crates/ufs-bench/src/writeorder.rs) makes them.
mh_create() {
  python3 - "$1" "$2" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(4)
os.mkdir(d)
num = 1
for _ in range(n):
    if rng.random() < 0.3:
        num += rng.randint(1, 200 if rng.random() < 0.1 else 5)
    size = min(8192, max(1024, round(1024 * 8 ** rng.random())))
    head = ("From: Correspondent %d <c%d@example.org>\nTo: reader@example.org\n"
            "Subject: message %d\n\n" % (num % 97, num % 97, num)).encode()
    body = b"the quick brown fox jumps over the lazy dog, again.\n" * (size // 52 + 1)
    with open(os.path.join(d, str(num)), "wb") as f:
        f.write((head + body)[:size - 1] + b"\n")
    num += 1
PY
}
a_dirs=$(find "$work/andrew" -type d | wc -l) a_files=$(find "$work/andrew" -type f | wc -l)
a_c=$(find "$work/andrew" -name '*.c' | wc -l)
a_bytes=$(find "$work/andrew" -type f -printf '%s\n' | addup)
a_inc=$(grep -r -c '#include' "$work/andrew" | addup)
mapfile -t a_sub < <(cd "$work/andrew" && find . -mindepth 1 -type d)
b_files=$(find "$work/build/src" -type f | wc -l) b_c=$(find "$work/build/src" -name '*.c' | wc -l)
b_inc=$(grep -r '#include' "$work/build/src/sys" | wc -l)
echo "tree $tree ($(tar -tf "$work/tree.tar" | wc -l) entries), bonnie++ -n $bn, postmark $pm files," \
  "andrew $ac copies of $a_files files ($acc compiled), build $b_files files ($b_c .c), $runs runs, 16 combinations"
csv=$out/paper-raw.csv
echo "test,su,dp,vm,dh,run,seconds,fsck_clean" > "$csv"
now() { date +%s.%N; }
# Cold cache for the next test: the kernel's dirty pages to the daemon,
# then the daemon writes its dirty blocks and drops every cached block and
# index, answering once done (a signal would return at once and leave the
# flush of soft updates' delayed writes inside the next test's time).
cold() { sync; $U stats --drop-caches "$work/mnt" >/dev/null; }
# expect WHAT GOT WANTED: stops the script when a phase left something else.
expect() {
  [ "$2" = "$3" ] || { echo "paper-mount.sh: $1: $2, expected $3 ($opts)" >&2; exit 1; }
}
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.6f", b - a }'; }
total=$((runs * 16)) n=0
for run in $(seq 0 $((runs - 1))); do
  for i in $(seq 0 15); do
    su=$(( (i >> 3) & 1 )) dp=$(( (i >> 2) & 1 )) vm=$(( (i >> 1) & 1 )) dh=$(( i & 1 ))
    n=$((n + 1))
    opts=$([ $su = 1 ] && echo softdep || echo normal)
    opts+=",dirpref=$([ $dp = 1 ] && echo orlov || echo traditional)"
    opts+=",vmiodir=$([ $vm = 1 ] && echo on || echo off)"
    opts+=",dirhash=$([ $dh = 1 ] && echo on,dirhash_maxmem=2M || echo off)"
    # FFS as the paper had it: inodes where FFS puts them (ufskit places
    # those of large directories in directory order by default).
    opts+=",inodeorder=off"
    # Ordered writes reach the disk before what depends on them, as
    # FreeBSD's bwrite waited for the paper's disks (normal mode would
    # otherwise wait only for the host's page cache; see DESIGN.md,
    # "Barriers"). Soft updates flush by default anyway.
    opts+=",barrier=flush"
    printf '[%d/%d] run %d: %s\n' "$n" "$total" "$run" "$opts"
    rm -f "$work/ufs.img"
    $U newfs -b 8192 -f 1024 -s 2G "$work/ufs.img" >/dev/null
    $U mount -o "$opts" "$work/ufs.img" "$work/mnt"
    rows=()
    row() { rows+=("$1,$su,$dp,$vm,$dh,$run,$2"); }
    # tar: extract, find, remove; the daemon's cache dropped before the
    # find, as the paper removed its trees between runs.
    t=$(now); tar -C "$work/mnt" -xf "$work/tree.tar"; row tar-extract "$(since "$t")"
    cold
    t=$(now); find "$work/mnt" -print >/dev/null; row tar-find "$(since "$t")"
    t=$(now); rm -rf "$work/mnt/$(basename "$tree")"; row tar-remove "$(since "$t")"
    # bonnie++: its own CSV line; a rate of "+++++" means the test took
    # under half a second and bonnie++ reports no figure: left out.
    mkdir "$work/mnt/bonnie"
    line=$("$BONNIE" -d "$work/mnt/bonnie" -s 0 -n "$bn" -u root -q 2>/dev/null | tail -1)
    IFS=, read -r -a f <<< "$line"
    files=$((bn * 1024))
    k=0
    for name in seq-create seq-stat seq-delete rand-create rand-stat rand-delete; do
      rate=${f[$((26 + 2 * k))]:-}
      if [[ $rate =~ ^[0-9]+$ ]] && [ "$rate" -gt 0 ]; then
        row "bonnie-$name" "$(awk -v n="$files" -v r="$rate" 'BEGIN { printf "%.6f", n / r }')"
      fi
      k=$((k + 1))
    done
    rmdir "$work/mnt/bonnie"
    # postmark: its default sizes (500 B to 10 KB), 10 subdirectories.
    mkdir "$work/mnt/pm"
    t=$(now)
    printf 'set location %s\nset number %d\nset transactions %d\nset subdirectories 10\nrun\nquit\n' \
      "$work/mnt/pm" "$pm" "$pm" | postmark >/dev/null
    row postmark "$(since "$t")"
    rmdir "$work/mnt/pm"
    # folder (seed 004's MH benchmark): the inbox's messages created in
    # ascending order with the gaps deletions left, nmh's `folder -pack`
    # renumbering them 1..N, rm -rf.
    mkdir -p "$work/mnt/Mail"
    t=$(now); mh_create "$work/mnt/Mail/inbox" "$mh"; row folder-create "$(since "$t")"
    expect "folder-create: messages" "$(ls "$work/mnt/Mail/inbox" | wc -l)" "$mh"
    printf 'Path: %s\n' "$work/mnt/Mail" > "$work/mh_profile"
    t=$(now)
    MH=$work/mh_profile MHCONTEXT=$work/mh_context "$FOLDER" +inbox -pack >/dev/null
    row folder-pack "$(since "$t")"
    expect "folder-pack: messages numbered 1..$mh" "$(ls "$work/mnt/Mail/inbox" | sort -n | awk '$0 != NR { bad++ } END { print NR - bad }')" "$mh"
    t=$(now); rm -rf "$work/mnt/Mail/inbox"; row folder-remove "$(since "$t")"
    expect "folder-remove: left" "$(ls -A "$work/mnt/Mail" | wc -l)" 0
    rmdir "$work/mnt/Mail"
    # andrew: C copies of the tree in andrew/a000, a001, ...
    a=$work/mnt/andrew dirs=() copies=()
    for c in $(seq 0 $((ac - 1))); do
      copies+=("$a/a$(printf %03d "$c")")
      for d in "${a_sub[@]}"; do dirs+=("${copies[-1]}/$d"); done
    done
    t=$(now); mkdir -p "${dirs[@]}"; row andrew-mkdir "$(since "$t")"
    expect "andrew-mkdir: directories" "$(find "$a" -type d | wc -l)" $((1 + ac * a_dirs))
    t=$(now); for c in "${copies[@]}"; do cp -r "$work/andrew/." "$c/"; done; row andrew-copy "$(since "$t")"
    expect "andrew-copy: files" "$(find "$a" -type f | wc -l)" $((ac * a_files))
    cold
    t=$(now); find "$a" -exec ls -l {} \; >/dev/null; du -s "$a" >/dev/null; row andrew-stat "$(since "$t")"
    cold
    t=$(now)
    inc=$(grep -r -c '#include' "$a" | addup)
    bytes=$(find "$a" -type f -exec wc {} + | awk '$NF != "total" { s += $3 } END { print s + 0 }')
    row andrew-grep "$(since "$t")"
    expect "andrew-grep: #include lines" "$inc" $((ac * a_inc))
    expect "andrew-grep: bytes" "$bytes" $((ac * a_bytes))
    t=$(now); for c in "${copies[@]:0:acc}"; do make -s -j2 -C "$c" >/dev/null; done; row andrew-compile "$(since "$t")"
    expect "andrew-compile: objects" "$(find "$a" -name '*.o' | wc -l)" $((acc * a_c))
    "${copies[0]}/prog" 3 >/dev/null || { echo "paper-mount.sh: andrew-compile: ${copies[0]}/prog does not run ($opts)" >&2; exit 1; }
    t=$(now); rm -rf "$a"; row andrew-remove "$(since "$t")"
    expect "andrew-remove: left" "$(find "$work/mnt" -path "$a*" | wc -l)" 0
    # build: src checked out, built into obj (gcc's temporaries in obj/tmp),
    # the kernel's sources searched, obj removed.
    b=$work/mnt/build
    mkdir "$b"
    t=$(now); tar -C "$b" -xf "$work/build.tar"; row build-checkout "$(since "$t")"
    expect "build-checkout: files" "$(find "$b/src" -type f | wc -l)" "$b_files"
    t=$(now)
    mkdir -p "$b/obj/tmp"
    TMPDIR=$b/obj/tmp make -s -j2 -C "$b/src" >/dev/null
    row build-compile "$(since "$t")"
    expect "build-compile: objects" "$(find "$b/obj" -name '*.o' | wc -l)" "$b_c"
    expect "build-compile: archives" "$(find "$b/obj" -name '*.a' | wc -l)" "$bd"
    expect "build-compile: temporaries left" "$(find "$b/obj/tmp" -type f | wc -l)" 0
    cold
    t=$(now); inc=$(grep -r '#include' "$b/src/sys" | wc -l); row build-grep "$(since "$t")"
    expect "build-grep: #include lines" "$inc" "$b_inc"
    t=$(now); rm -rf "$b/obj"; row build-remove "$(since "$t")"
    rm -rf "$b"
    expect "build-remove: left" "$(find "$work/mnt" -path "$b*" | wc -l)" 0
    # maildir (seed 002): scripts/paper_maildir.py, one phase per call;
    # each phase checks what it leaves and fails the script otherwise.
    mkdir "$work/mnt/mail"
    for ph in setup deliver imap poll remove; do
      # poll only reads: from a cold cache, with imap's writes on the image
      if [ $ph = poll ]; then cold; fi
      t=$(now); python3 scripts/paper_maildir.py $ph "$work/mnt/mail" "$md" "$mk"; row "maildir-$ph" "$(since "$t")"
    done
    rmdir "$work/mnt/mail"
    # largedir (seed 001's script): files of 4 KB with random 16-hex-digit
    # names in one directory, then ls -l, find and rm -rf, each from a
    # cold cache as the script's drop_caches made them.
    l=$work/mnt/largedir
    t=$(now); ld_create "$l" "$ld"; row largedir-create "$(since "$t")"
    expect "largedir-create: files" "$(ls -f "$l" | wc -l)" $((ld + 2))
    cold; t=$(now); ls -l "$l" >/dev/null; row largedir-ls "$(since "$t")"
    cold; t=$(now); find "$l" >/dev/null; row largedir-find "$(since "$t")"
    cold; t=$(now); rm -rf "$l"; row largedir-remove "$(since "$t")"
    expect "largedir-remove: left" "$([ -e "$l" ] && echo "$l" || echo nothing)" nothing
    $U umount "$work/mnt"
    if $U fsck -n "$work/ufs.img" >/dev/null; then clean=true; else clean=false; fi
    for r in "${rows[@]}"; do echo "$r,$clean" >> "$csv"; done
    if [ $clean != true ]; then
      $U fsck -n "$work/ufs.img" || true
      echo "paper-mount.sh: the image was not fsck clean after $opts" >&2
      exit 1
    fi
  done
done
cat > "$out/paper.json" <<EOF
{"profile": {"name": "mount-$([ $quick = 1 ] && echo quick || echo full)", "tree": "$tree", "bonnie_files": $((bn * 1024)), "postmark_files": $pm, "andrew_copies": $ac, "andrew_compiled": $acc, "build_sources": $b_c, "runs": $runs},
 "disk": "this machine's image file under FUSE (wall clock)", "disk_description": "$(uname -srm)",
 "cpu_model": {"name": "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"}}
EOF
# A bonnie++ test without a figure under every optimisation off has no
# baseline: left out of the analysis (paper.csv; paper-raw.csv keeps it).
awk -F, 'NR == FNR { if ($2 == 0 && $3 == 0 && $4 == 0 && $5 == 0) base[$1] = 1; next }
         FNR == 1 || ($1 in base)' "$csv" "$csv" > "$out/paper.csv"
# The report's "why" column explains the modeled runs; these are not.
why="Wall clock of this machine through the FUSE mount (one client, the daemon's own buffer cache over an image in the host's page cache), not the modeled 2002 machine of ufskit bench paper: every request costs a round trip to the daemon, synchronous writes go to the page cache rather than a disk, and few runs are repeated; compare the direction of effects, not their size (docs/EVALUATION.md)."
python3 - "$out/explanations.json" "$why" <<'PY'
import json, sys
json.dump({k: sys.argv[2] for k in "abcdefghijklmn"}, open(sys.argv[1], "w"), indent=1)
PY
echo "results: $csv $out/paper.csv"
python3 analysis/paper_stats.py "$out/paper.csv" --out "$out" >/dev/null
python3 analysis/paper_report.py "$out" --title "ufskit through FUSE: the paper's evaluation with real programs"
if [ -n "$beside" ]; then
  python3 analysis/paper_report.py "$beside"
fi
