#!/usr/bin/env python3
"""Reads a UFS image with an independent reader, dissect.ffs (fox-it, from
PyPI: Python, little-endian UFS1 and UFS2), and compares what it finds under
PATH with a host directory: the same names, types, sizes, bytes of every
file, symlink targets, permission bits and modification times.

usage: independent-read.py IMAGE PATH HOSTDIR
Exit 0 when they agree, 1 with the differences listed otherwise, 2 on usage.
Run it with a Python that has dissect.ffs (scripts/test.sh makes a venv)."""
import hashlib
import os
import stat
import sys

from dissect.ffs import FFS


def walk_image(node, rel, out):
    for name, child in sorted(node.listdir().items()):
        if name in (".", ".."):
            continue
        path = os.path.join(rel, name)
        mode = child.mode
        if child.is_dir():
            out[path] = ("dir", stat.S_IMODE(mode), None)
            walk_image(child, path, out)
        elif child.is_symlink():
            out[path] = ("link", None, child.link)
        elif child.is_file():
            data = child.open().read()
            out[path] = ("file", stat.S_IMODE(mode),
                         (len(data), hashlib.sha256(data).hexdigest(), int(child.mtime.timestamp())))
        else:
            out[path] = ("other", stat.S_IMODE(mode), None)


def walk_host(root):
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            full = os.path.join(dirpath, name)
            path = os.path.relpath(full, root)
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[path] = ("link", None, os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                out[path] = ("dir", stat.S_IMODE(st.st_mode), None)
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    data = f.read()
                out[path] = ("file", stat.S_IMODE(st.st_mode),
                             (len(data), hashlib.sha256(data).hexdigest(), int(st.st_mtime)))
            else:
                out[path] = ("other", stat.S_IMODE(st.st_mode), None)
    return out


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[4], file=sys.stderr)
        return 2
    image, path, host = argv[1:]
    with open(image, "rb") as fh:
        fs = FFS(fh)
        got = {}
        walk_image(fs.get(path), "", got)
    want = walk_host(host)
    problems = []
    for k in sorted(set(want) | set(got)):
        if k not in got:
            problems.append("missing in the image: %s" % k)
        elif k not in want:
            problems.append("only in the image: %s" % k)
        elif got[k] != want[k]:
            problems.append("%s: image %r, host %r" % (k, got[k], want[k]))
    for p in problems[:20]:
        print(p)
    if problems:
        print("%d differences between %s:%s and %s" % (len(problems), image, path, host))
        return 1
    print("dissect.ffs reads %d entries of %s:%s as the host has them" % (len(got), image, path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
