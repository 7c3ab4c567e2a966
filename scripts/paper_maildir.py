#!/usr/bin/env python3
"""Seed 002's maildir/IMAP workload through a mounted file system, one phase
per call, for scripts/paper-mount.sh (the in-process form is
crates/ufs-bench/src/paper/seeds.rs; seed 002's own driver was a Python
script too, which the seed does not include).

usage: paper_maildir.py PHASE DIR MAILDIRS MESSAGES
  setup    MAILDIRS maildirs DIR/mdN/{cur,new,tmp}, MESSAGES messages in
           each cur (real maildir names, a few hundred bytes to a few KB)
  deliver  50 deliveries per maildir to maildirs picked at random: written
           in tmp under a name checked free, renamed into new
  imap     one session per maildir, ten interleaved round-robin: list new
           and cur, move every new message to cur with ":2,S", stat every
           message in random order, read a tenth, delete a tenth
  poll     three passes over all maildirs in random order: list new and
           cur, stat every message in random order
  remove   rm -rf of every maildir

Every phase draws from a generator seeded by its name and sorts what it
lists before drawing, so a phase makes the same calls on every file system
given the same files, whatever order readdir returns them in; the state is
read back from the directories. Each phase checks what it leaves (counts, no
message left in new after imap, nothing after remove) and exits 1 with a
message otherwise.
"""
import os
import random
import shutil
import sys

DELIVERIES_PER_MAILDIR = 50
SESSIONS = 10
POLL_PASSES = 3
HOST = "mail.example.org"


def name(rng, n, size, flags=None):
    t = 1_200_000_000 + n * 37
    base = "%d.M%dP%dQ%d.%s,S=%d" % (t, rng.randrange(1_000_000), 1000 + n % 30000, n, HOST, size)
    return base if flags is None else base + ":2," + flags


def body(n, size):
    head = ("Return-Path: <c%d@example.org>\nFrom: Correspondent <c%d@example.org>\n"
            "To: reader@example.org\nSubject: message %d\n\n" % (n % 97, n % 97, n)).encode()
    text = b"a line of the message, as mail has them.\n" * (size // 40 + 1)
    return (head + text)[:size - 1] + b"\n"


def boxes(d):
    return sorted(e for e in os.listdir(d) if e.startswith("md"))


def fail(msg):
    sys.exit("paper_maildir.py: " + msg)


def setup(d, m, k):
    rng = random.Random("setup")
    n = 0
    for b in range(m):
        md = os.path.join(d, "md%04d" % b)
        os.makedirs(os.path.join(md, "cur"))
        for _ in range(k):
            size = rng.randint(300, 4000)
            flags = rng.choice(["S", "RS", "FS", ""])
            with open(os.path.join(md, "cur", name(rng, n, size, flags)), "wb") as f:
                f.write(body(n, size))
            n += 1
        os.mkdir(os.path.join(md, "new"))
        os.mkdir(os.path.join(md, "tmp"))
    got = sum(len(os.listdir(os.path.join(d, b, "cur"))) for b in boxes(d))
    if got != m * k:
        fail("setup: %d messages, expected %d" % (got, m * k))


def deliver(d, m):
    rng = random.Random("deliver")
    bs = boxes(d)
    for i in range(DELIVERIES_PER_MAILDIR * m):
        md = os.path.join(d, rng.choice(bs))
        size = rng.randint(300, 4000)
        nm = name(rng, 10_000_000 + i, size)
        tmp = os.path.join(md, "tmp", nm)
        if os.path.exists(tmp):
            fail("deliver: %s exists" % tmp)
        with open(tmp, "wb") as f:
            f.write(body(i, size))
        os.rename(tmp, os.path.join(md, "new", nm))
    got = sum(len(os.listdir(os.path.join(d, b, "new"))) for b in bs)
    if got != DELIVERIES_PER_MAILDIR * m:
        fail("deliver: %d in new, expected %d" % (got, DELIVERIES_PER_MAILDIR * m))


def session(rng, md):
    """One IMAP session's steps, as a generator (the caller interleaves)."""
    new, cur = os.path.join(md, "new"), os.path.join(md, "cur")
    arrived = sorted(os.listdir(new))
    yield
    for nm in arrived:
        os.rename(os.path.join(new, nm), os.path.join(cur, nm + ":2,S"))
        yield
    msgs = sorted(os.listdir(cur))
    rng.shuffle(msgs)
    for nm in msgs:
        os.stat(os.path.join(cur, nm))
        yield
    for nm in msgs[: len(msgs) // 10]:
        with open(os.path.join(cur, nm), "rb") as f:
            f.read()
        yield
    for nm in msgs[len(msgs) // 10: len(msgs) // 5]:
        os.unlink(os.path.join(cur, nm))
        yield


def interleave(gens):
    live = list(gens)
    while live:
        for g in list(live):
            try:
                next(g)
            except StopIteration:
                live.remove(g)


def imap(d):
    rng = random.Random("imap")
    bs = boxes(d)
    for i in range(0, len(bs), SESSIONS):
        interleave(session(rng, os.path.join(d, b)) for b in bs[i:i + SESSIONS])
    left = sum(len(os.listdir(os.path.join(d, b, "new"))) for b in bs)
    if left:
        fail("imap: %d messages left in new" % left)


def poll_visit(rng, md):
    for sub in ("new", "cur"):
        msgs = sorted(os.listdir(os.path.join(md, sub)))
        yield
        rng.shuffle(msgs)
        for nm in msgs:
            os.stat(os.path.join(md, sub, nm))
            yield


def poll(d):
    rng = random.Random("poll")
    bs = boxes(d)
    for _ in range(POLL_PASSES):
        order = bs[:]
        rng.shuffle(order)
        for i in range(0, len(order), SESSIONS):
            interleave(poll_visit(rng, os.path.join(d, b)) for b in order[i:i + SESSIONS])


def remove(d):
    for b in boxes(d):
        shutil.rmtree(os.path.join(d, b))
    if boxes(d):
        fail("remove: maildirs left")


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("setup", "deliver", "imap", "poll", "remove"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    phase, d, m, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    {"setup": lambda: setup(d, m, k), "deliver": lambda: deliver(d, m), "imap": lambda: imap(d),
     "poll": lambda: poll(d), "remove": lambda: remove(d)}[phase]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
