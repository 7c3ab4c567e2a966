#!/usr/bin/env python3
"""Plots seed 000's dirpref experiment (ufs-bench `dirpref`): modeled
seconds of `tar -x` and `rm -rf` under the traditional and Orlov directory
placement, per system, with the speed-up written over each pair, and where
the modeled time went (seek, rotation, transfer, overhead).

usage: python3 analysis/plot_dirpref.py RESULTS.json OUTDIR

Input: {"tree": str, "systems": [...], "runs": [{"system": str,
  "policy": "traditional"|"orlov", "extract_ms": float, "rm_ms": float,
  "extract_disk": {"seek_ms", "rotation_ms", "transfer_ms", "overhead_ms"},
  "rm_disk": {...}, ...}, ...]}
Writes dirpref_times.png and dirpref_breakdown.png.
"""
import sys

import plotenv  # noqa: E402

matplotlib, pd = plotenv.load(__file__)
import matplotlib.pyplot as plt  # noqa: E402

BadInput = plotenv.BadInput
POLICIES = ["traditional", "orlov"]
PARTS = ["seek_ms", "rotation_ms", "transfer_ms", "overhead_ms"]


def load(path):
    doc = plotenv.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise BadInput("expected an object with a non-empty \"runs\" list")
    rows = []
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict) or r.get("policy") not in POLICIES or not isinstance(r.get("system"), str):
            raise BadInput("run %d lacks a system or a policy (traditional/orlov)" % i)
        for step, key in (("tar -x", "extract"), ("rm -rf", "rm")):
            ms, disk = r.get(key + "_ms"), r.get(key + "_disk")
            if (not plotenv.nonneg(ms) or not isinstance(disk, dict)
                    or not all(plotenv.nonneg(disk.get(p)) for p in PARTS)):
                raise BadInput("run %d: %s_ms and %s_disk with %s are required" % (i, key, key, ", ".join(PARTS)))
            row = {"system": r["system"], "policy": r["policy"], "step": step, "s": ms / 1000.0}
            row.update({p: disk[p] / 1000.0 for p in PARTS})
            rows.append(row)
    return doc.get("tree", "?"), pd.DataFrame(rows)


def draw(data, outdir, written):
    tree, df = data
    systems = list(dict.fromkeys(df["system"]))
    steps = ["tar -x", "rm -rf"]
    fig, axes = plt.subplots(1, len(systems), figsize=(5.5 * len(systems), 4.5), squeeze=False)
    for ax, sysname in zip(axes[0], systems):
        sub = df[df["system"] == sysname]
        width = 0.38
        for k, pol in enumerate(POLICIES):
            vals = [sub[(sub["step"] == st) & (sub["policy"] == pol)]["s"].sum() for st in steps]
            xs = [i + (k - 0.5) * width for i in range(len(steps))]
            ax.bar(xs, vals, width, label=pol, color="tab:red" if pol == "traditional" else "tab:blue")
        for i, st in enumerate(steps):
            o = sub[(sub["step"] == st) & (sub["policy"] == "traditional")]["s"].sum()
            n = sub[(sub["step"] == st) & (sub["policy"] == "orlov")]["s"].sum()
            if o > 0 and n > 0:
                ax.annotate("%.1fx" % (o / n), (i, max(o, n)), xytext=(0, 4), textcoords="offset points",
                            ha="center", fontsize=9)
        ax.set_xticks(range(len(steps)))
        ax.set_xticklabels(steps)
        ax.set_ylabel("modeled seconds (cold cache)")
        ax.set_title(sysname, fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("dirpref: traditional vs Orlov, tree: %s" % tree, fontsize=10)
    fig.tight_layout()
    plotenv.save(fig, outdir, "dirpref_times.png", written)

    fig, ax = plt.subplots(figsize=(9, 4.5))
    labels, bottoms = [], None
    bars = df.assign(label=lambda d: d["system"].str.split(",").str[0] + "\n" + d["step"] + "\n" + d["policy"])
    labels = list(bars["label"])
    bottom = [0.0] * len(bars)
    colours = {"seek_ms": "tab:red", "rotation_ms": "tab:orange", "transfer_ms": "tab:green", "overhead_ms": "tab:gray"}
    for p in PARTS:
        vals = list(bars[p])
        ax.bar(range(len(vals)), vals, bottom=bottom, color=colours[p], label=p.replace("_ms", ""))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylabel("modeled seconds")
    ax.set_title("where the modeled disk time goes")
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    plotenv.save(fig, outdir, "dirpref_breakdown.png", written)


if __name__ == "__main__":
    sys.exit(plotenv.main(sys.argv, load, draw))
