#!/usr/bin/env python3
"""Test for plot_largedir.py: plots a small synthetic result file (two sizes,
two inode orders, fresh and churned) and checks that every figure is written
as a valid PNG; and that missing or malformed input fails with a message and
no traceback. Plain python; exits non-zero on failure.
usage: python3 analysis/test_plot_largedir.py"""
import json
import os
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_largedir.py")
PYTHON = "/usr/bin/python3"  # has matplotlib and pandas (Debian packages)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXPECTED = ["largedir_per_file.png", "largedir_tar.png", "largedir_locality.png"]
STEPS = ["create", "ls", "tar", "find", "cp -a", "rm -rf"]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def layout(files, locality):
    return {"readdir_locality": locality, "name_locality": 0.5, "data_locality": 0.99,
            "entries": files, "files_with_data": files, "inode_groups": 1, "same_group_data": 1.0}


def synthetic():
    """`off` gets slower per file as N grows and loses locality after churn;
    `offset` stays flat and in inode order."""
    runs = []
    for files in (1000, 10000):
        for order in ("off", "offset"):
            for churned in (False, True):
                growth = (files / 1000.0) ** 0.5 if order == "off" else 1.0
                churn = 3.0 if churned and order == "off" else 1.0
                names = STEPS[:1] + (["churn"] if churned else []) + STEPS[1:]
                steps = []
                for k, name in enumerate(names):
                    us = (10.0 + 30 * k) * growth * churn
                    steps.append({"name": name, "modeled_ms": us * files / 1000.0, "wall_ms": 1.0,
                                  "modeled_us_per_file": us, "disk": {"reads": files, "writes": 0}})
                loc = 1.0 if order == "offset" else (0.75 if churned else 0.9)
                runs.append({"files": files, "order": order, "churned": churned, "steps": steps,
                             "layout": layout(files, loc), "copy_layout": layout(files, 1.0),
                             "fsck_clean": True, "wall_s": 0.5})
    return {"machine": {"disk": "synthetic", "cache_bytes": 256 << 20, "dirhash_maxmem": 64 << 20},
            "runs": runs}


def run(json_path, outdir):
    return subprocess.run([PYTHON, SCRIPT, json_path, outdir],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)


def png_ok(path):
    with open(path, "rb") as f:
        head = f.read(33)
    if len(head) < 33 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return False
    width, height = struct.unpack(">II", head[16:24])
    return width > 0 and height > 0


def main():
    with tempfile.TemporaryDirectory(prefix="plot-largedir-test.") as tmp:
        src = os.path.join(tmp, "largedir.json")
        with open(src, "w") as f:
            json.dump(synthetic(), f)
        out = os.path.join(tmp, "out")  # does not exist yet: the script makes it
        r = run(src, out)
        check(r.returncode == 0, "plot exits 0 (rc=%d, stderr: %s)" % (r.returncode, r.stderr.strip()))
        printed = r.stdout.split("\n")
        for name in EXPECTED:
            path = os.path.join(out, name)
            check(os.path.isfile(path), "%s written" % name)
            if os.path.isfile(path):
                check(png_ok(path), "%s is a PNG" % name)
            check(path in printed, "%s listed in the output" % name)

        # Fresh runs only (no churned ones): the figures still come out.
        doc = synthetic()
        doc["runs"] = [x for x in doc["runs"] if not x["churned"]]
        with open(src, "w") as f:
            json.dump(doc, f)
        r = run(src, os.path.join(tmp, "out2"))
        check(r.returncode == 0, "fresh-only runs still plot (stderr: %s)" % r.stderr.strip())
        for name in EXPECTED:
            check(png_ok(os.path.join(tmp, "out2", name)), "%s with fresh runs only is a PNG" % name)

        # Failures: each must exit non-zero with a message naming the problem.
        def with_run(**change):
            doc = synthetic()
            doc["runs"][0] = dict(doc["runs"][0], **change)
            return json.dumps(doc)

        fresh_run = synthetic()["runs"][0]
        bad_cases = {
            "missing file": (None, "no such file"),
            "not JSON": ("{runs: [", "not valid JSON"),
            "no runs": (json.dumps({"machine": {}}), '"runs"'),
            "empty runs": (json.dumps({"machine": {}, "runs": []}), "non-empty"),
            "run without steps": (with_run(steps=None), '"steps"'),
            "empty steps": (with_run(steps=[]), '"steps"'),
            "unknown order": (with_run(order="random"), "random"),
            "unknown step": (with_run(steps=[dict(fresh_run["steps"][0], name="mv")]), "mv"),
            "churn step in fresh run": (with_run(steps=fresh_run["steps"] + [dict(fresh_run["steps"][0],
                                                                               name="churn")]), "churn"),
            "string number": (with_run(steps=[dict(fresh_run["steps"][0], modeled_us_per_file="3")]),
                              "modeled_us_per_file"),
            "no layout": (with_run(layout=None), "readdir_locality"),
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
            check("Traceback" not in r.stderr, "%s: no traceback (got: %s)" % (label, r.stderr.strip()))
        check(not os.path.exists(os.path.join(tmp, "out-bad")), "bad input writes nothing")

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok: %d figures, %d bad inputs rejected" % (len(EXPECTED), len(bad_cases)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
