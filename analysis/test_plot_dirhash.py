#!/usr/bin/env python3
"""Test for plot_dirhash.py: plots a small synthetic result file and checks
that every figure is written as a valid PNG; and that missing or malformed
input fails with a message. Plain python; exits non-zero on failure.
usage: python3 analysis/test_plot_dirhash.py"""
import json
import os
import sys

import plottest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_dirhash.py")
EXPECTED = ["fig2_create.png", "fig3_remove.png", "fig4_stat_seq.png", "fig5_stat_random.png",
            "fig6_stat_missing.png", "memory.png", "scanned.png"]
OPS = ["create", "remove", "stat_seq", "stat_random", "stat_missing"]
ENTRY_BYTES = 20  # a short name's directory entry, roughly


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


def main():
    # Memory and build may be empty: the figure still comes out.
    empty = synthetic()
    empty["memory"], empty["build"] = [], []

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
    return plottest.main(plottest.runner(SCRIPT), "dirhash", synthetic(), EXPECTED,
                         (empty, ["memory.png"], "empty memory/build still plots", "%s with no data is a PNG"),
                         bad_cases)


if __name__ == "__main__":
    sys.exit(main())
