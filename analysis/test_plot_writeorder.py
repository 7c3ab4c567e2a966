#!/usr/bin/env python3
"""Test for plot_writeorder.py: plots a small synthetic result file (both
workloads, all four write modes) and checks that the figure is written as
a valid PNG; that a file with only some modes and a zero time still plots;
and that missing or malformed input fails with a message and no traceback.
Plain python; exits non-zero on failure.
usage: python3 analysis/test_plot_writeorder.py"""
import json
import os
import sys

import plottest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "plot_writeorder.py")
PYTHON = "/usr/bin/python3"  # has matplotlib and pandas (Debian packages)
EXPECTED = ["writeorder.png"]
PHASES = {"files": ["create", "remove"], "mh": ["create", "pack", "remove"]}
# Modeled seconds of phase + sync, roughly the shape the modes should have.
COST = {"normal": 60.0, "sync": 90.0, "async": 2.0, "softdep": 2.5}


def phase(name, total_s, alone_s):
    return {"name": name, "modeled_ms": alone_s * 1e3, "modeled_sync_ms": total_s * 1e3,
            "wall_ms": 10.0, "wall_sync_ms": 12.0, "reads": 3, "writes": 100,
            "order": {"changes": 10, "forced_writes": 0}, "order_sync": {"changes": 10, "forced_writes": 0}}


def synthetic(modes=("normal", "sync", "async", "softdep")):
    runs = []
    for w, names in PHASES.items():
        for mode in modes:
            delayed = mode in ("async", "softdep")
            phases = [phase(n, COST[mode] * (k + 1), 0.1 if delayed else COST[mode] * (k + 1) * 0.95)
                      for k, n in enumerate(names)]
            runs.append({"workload": w, "mode": mode, "vmiodir": True, "phases": phases,
                         "fsck_clean": True, "fsck_findings": [], "wall_s": 1.0})
    return {"config": {"profile": "quick", "files": 2000, "messages": 3000, "disk": "synthetic",
                       "cache_bytes": 64 << 20, "vmiodir": True},
            "runs": runs, "ratios": []}


def main():
    # Two modes only, and an async phase that cost nothing before its sync.
    partial = synthetic(("normal", "async"))
    partial["runs"][1]["phases"][0]["modeled_ms"] = 0.0

    def with_run(**change):
        doc = synthetic()
        doc["runs"][0] = dict(doc["runs"][0], **change)
        return json.dumps(doc)

    first = synthetic()["runs"][0]
    good = first["phases"][0]
    bad_cases = {
        "missing file": (None, "no such file"),
        "not JSON": ("{runs: [", "not valid JSON"),
        "no runs": (json.dumps({"config": {}}), '"runs"'),
        "empty runs": (json.dumps({"config": {}, "runs": []}), "non-empty"),
        "config not an object": (json.dumps({"config": [], "runs": [first]}), '"config"'),
        "unknown workload": (with_run(workload="postmark"), "postmark"),
        "unknown mode": (with_run(mode="journal"), "journal"),
        "no phases": (with_run(phases=None), '"phases"'),
        "phase of another workload": (with_run(phases=[dict(good, name="pack")]), "pack"),
        "phase twice": (with_run(phases=[good, good]), "twice"),
        "string number": (with_run(phases=[dict(good, modeled_sync_ms="3")]), "modeled_sync_ms"),
        "negative time": (with_run(phases=[dict(good, modeled_ms=-1.0)]), "modeled_ms"),
        "phase above its sync": (with_run(phases=[dict(good, modeled_ms=good["modeled_sync_ms"] + 1)]),
                                 "exceeds"),
    }
    return plottest.main(plottest.runner(SCRIPT, PYTHON), "writeorder", synthetic(), EXPECTED,
                         (partial, EXPECTED, "some modes only still plot",
                          "%s with some modes only is a PNG"),
                         bad_cases, no_traceback=True)


if __name__ == "__main__":
    sys.exit(main())
