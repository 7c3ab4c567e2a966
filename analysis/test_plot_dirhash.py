#!/usr/bin/env python3
"""Test for plot_dirhash.py: plots a small synthetic result file and checks
that every figure is written as a valid PNG; and that missing or malformed
input fails with a message. Plain python; exits non-zero on failure.
usage: python3 analysis/test_plot_dirhash.py"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_dirhash.py")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPECTED = ["fig2_create.png", "fig3_remove.png", "fig4_stat_seq.png", "fig5_stat_random.png",
            "fig6_stat_missing.png", "memory.png", "scanned.png"]
OPS = ["create", "remove", "stat_seq", "stat_random", "stat_missing"]
ENTRY_BYTES = 20  # a short name's directory entry, roughly

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def synthetic():
    """Linear scans cost in proportion to the directory, dirhash about
    constant; one repeated point to exercise averaging."""
    points = []
    sizes = {"large": [1000, 10000, 50000, 100000, 150000, 200000],
             "small": [b // ENTRY_BYTES for b in range(512, 8193, 512)]}
    for rng, entries_list in sizes.items():
        for entries in entries_list:
            for mode in ("dirhash", "linear"):
                for op in OPS:
                    if mode == "linear":
                        scanned = entries if op in ("create", "stat_missing") else entries / 2
                        us = 0.8 + scanned * 0.004
                    else:
                        scanned = 0.0 if op == "create" else 1.2
                        us = 1.0 + 0.05 * (op == "create")
                    points.append({"mode": mode, "range": rng, "entries": entries,
                                   "dir_bytes": entries * ENTRY_BYTES, "op": op, "ops": entries,
                                   "us_per_op": us, "entries_scanned_per_op": scanned})
    points.append(dict(points[0], us_per_op=points[0]["us_per_op"] * 1.1))
    memory = [{"entries": n, "dir_bytes": n * ENTRY_BYTES, "hash_bytes": int(n * ENTRY_BYTES * 0.5),
               "bytes_per_dir_byte": 0.5} for n in (100, 1000, 10000, 100000, 200000)]
    build = [{"entries": n, "dir_bytes": n * ENTRY_BYTES, "us": n * 0.03} for n in (100, 1000, 10000, 200000)]
    return {"config": {"seed": 1, "block_size": 32768, "note": "synthetic"},
            "points": points, "memory": memory, "build": build}


def run(json_path, outdir):
    return subprocess.run([sys.executable, SCRIPT, json_path, outdir],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def png_ok(path):
    with open(path, "rb") as f:
        head = f.read(33)
    if len(head) < 33 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return False
    width, height = struct.unpack(">II", head[16:24])
    return width > 0 and height > 0


def main():
    with tempfile.TemporaryDirectory(prefix="plot-dirhash-test.") as tmp:
        src = os.path.join(tmp, "dirhash.json")
        with open(src, "w") as f:
            json.dump(synthetic(), f)
        out = os.path.join(tmp, "out")  # does not exist yet: the script makes it
        r = run(src, out)
        check(r.returncode == 0, "plot exits 0 (rc=%d, stderr: %s)" % (r.returncode, r.stderr.strip()))
        printed = r.stdout.split()
        for name in EXPECTED:
            path = os.path.join(out, name)
            check(os.path.isfile(path), "%s written" % name)
            if os.path.isfile(path):
                check(os.path.getsize(path) > 0, "%s non-empty" % name)
                check(png_ok(path), "%s is a PNG" % name)
            check(path in printed, "%s listed in the output" % name)

        # Memory and build may be empty: the figure still comes out.
        doc = synthetic()
        doc["memory"], doc["build"] = [], []
        with open(src, "w") as f:
            json.dump(doc, f)
        r = run(src, os.path.join(tmp, "out2"))
        check(r.returncode == 0, "empty memory/build still plots (stderr: %s)" % r.stderr.strip())
        check(png_ok(os.path.join(tmp, "out2", "memory.png")), "memory.png with no data is a PNG")

        # Failures: each must exit non-zero with a message naming the problem.
        bad_cases = {
            "missing file": (None, "no such file"),
            "not JSON": ("{points: [", "not valid JSON"),
            "no points": (json.dumps({"config": {}, "memory": [], "build": []}), '"points"'),
            "empty points": (json.dumps({"points": [], "memory": [], "build": []}), "empty"),
            "field missing": (json.dumps({"points": [{"mode": "dirhash"}], "memory": [], "build": []}),
                              '"range"'),
            "unknown op": (json.dumps(dict(synthetic(), points=[dict(synthetic()["points"][0], op="rename")])),
                           "rename"),
            "string number": (json.dumps(dict(synthetic(), points=[dict(synthetic()["points"][0], us_per_op="3")])),
                              "us_per_op"),
        }
        for label, (content, needle) in bad_cases.items():
            path = os.path.join(tmp, "bad.json")
            if os.path.exists(path):
                os.unlink(path)
            if content is not None:
                with open(path, "w") as f:
                    f.write(content)
            r = run(path, os.path.join(tmp, "out-bad"))
            check(r.returncode != 0, "%s: exits non-zero" % label)
            check(needle in r.stderr, "%s: message mentions %r (got: %s)" % (label, needle, r.stderr.strip()))
        check(not os.path.exists(os.path.join(tmp, "out-bad")), "bad input writes nothing")

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok: %d figures, %d bad inputs rejected" % (len(EXPECTED), len(bad_cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
