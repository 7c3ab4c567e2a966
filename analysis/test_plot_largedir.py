#!/usr/bin/env python3
"""Test for plot_largedir.py: plots a small synthetic result file (two sizes,
two inode orders, fresh and churned) and checks that every figure is written
as a valid PNG; and that missing or malformed input fails with a message and
no traceback. Plain python; exits non-zero on failure.
usage: python3 analysis/test_plot_largedir.py"""
import json
import os
import sys

import plottest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_largedir.py")
PYTHON = "/usr/bin/python3"  # has matplotlib and pandas (Debian packages)
EXPECTED = ["largedir_per_file.png", "largedir_tar.png", "largedir_locality.png"]
STEPS = ["create", "ls", "tar", "find", "cp -a", "rm -rf"]


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


def main():
    # Fresh runs only (no churned ones): the figures still come out.
    fresh = synthetic()
    fresh["runs"] = [x for x in fresh["runs"] if not x["churned"]]

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
    return plottest.main(plottest.runner(SCRIPT, PYTHON), "largedir", synthetic(), EXPECTED,
                         (fresh, EXPECTED, "fresh-only runs still plot", "%s with fresh runs only is a PNG"),
                         bad_cases, no_traceback=True)


if __name__ == "__main__":
    sys.exit(main())
