#!/usr/bin/env python3
"""Plots seed 001's large-directory benchmark (ufskit `bench largedir`): N
files of 4 KB in one directory, then ls, tar, find, cp -a and rm -rf from a
cold cache on a modeled disk, under each inode order (off, offset, name,
hash), fresh and after churn. Shows the modeled time per file of each step
against N, with the acceptance target (within 1.2x of the time per file at
the smallest size), and the readdir locality of the directory.

usage: python3 analysis/plot_largedir.py RESULTS.json OUTDIR

Input: {"machine": {"disk": str, "cache_bytes": int, "dirhash_maxmem": int},
  "runs": [{"files": int, "order": "off"|"offset"|"name"|"hash",
  "churned": bool, "steps": [{"name": "create"|"churn"|"ls"|"tar"|"find"|
  "cp -a"|"rm -rf", "modeled_ms": float, "wall_ms": float,
  "modeled_us_per_file": float, "disk": {...}}, ...],
  "layout": {"readdir_locality": float, "name_locality": float,
  "data_locality": float, ...}, "copy_layout": {...}, "fsck_clean": bool,
  "wall_s": float}, ...]}
A "churn" step only exists when churned is true. Repeated runs of one
configuration are averaged.
Writes largedir_per_file.png, largedir_tar.png and largedir_locality.png.
"""
import sys

import plotenv  # noqa: E402

matplotlib, pd = plotenv.load(__file__)
import matplotlib.pyplot as plt  # noqa: E402

BadInput = plotenv.BadInput
ORDERS = ["off", "offset", "name", "hash"]
COLOURS = {"off": "tab:red", "offset": "tab:blue", "name": "tab:green", "hash": "tab:purple"}
# Distinct markers (largest first) so orders with equal values stay visible.
MARKERS = {"off": ("o", 9), "offset": ("s", 7), "name": ("^", 6), "hash": ("D", 4)}
STEPS = ["create", "churn", "ls", "tar", "find", "cp -a", "rm -rf"]
STATES = [(False, "fresh"), (True, "after churn")]
TARGET_FACTOR = 1.2
LOCALITY_TARGET = 0.99


def load(path):
    doc = plotenv.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise BadInput("expected an object with a non-empty \"runs\" list")
    machine = doc.get("machine", {})
    if not isinstance(machine, dict):
        raise BadInput("\"machine\" must be an object")
    rows, layouts = [], []
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict):
            raise BadInput("run %d is not an object" % i)
        files = r.get("files")
        if not isinstance(files, int) or isinstance(files, bool) or files <= 0:
            raise BadInput("run %d: \"files\" must be a positive integer" % i)
        if r.get("order") not in ORDERS:
            raise BadInput("run %d: \"order\" must be one of %s (got %r)" % (i, "/".join(ORDERS), r.get("order")))
        if not isinstance(r.get("churned"), bool):
            raise BadInput("run %d: \"churned\" must be true or false" % i)
        steps = r.get("steps")
        if not isinstance(steps, list) or not steps:
            raise BadInput("run %d: a non-empty \"steps\" list is required" % i)
        seen = set()
        for j, s in enumerate(steps):
            if not isinstance(s, dict) or s.get("name") not in STEPS:
                raise BadInput("run %d step %d: \"name\" must be one of %s (got %r)"
                               % (i, j, ", ".join(STEPS), s.get("name") if isinstance(s, dict) else s))
            if s["name"] in seen:
                raise BadInput("run %d: step %r appears twice" % (i, s["name"]))
            seen.add(s["name"])
            if s["name"] == "churn" and not r["churned"]:
                raise BadInput("run %d: a \"churn\" step in a run that is not churned" % i)
            if not plotenv.nonneg(s.get("modeled_us_per_file")):
                raise BadInput("run %d step %r: \"modeled_us_per_file\" must be a non-negative number"
                               % (i, s["name"]))
            rows.append({"files": files, "order": r["order"], "churned": r["churned"], "step": s["name"],
                         "us": float(s["modeled_us_per_file"])})
        layout = r.get("layout")
        loc = layout.get("readdir_locality") if isinstance(layout, dict) else None
        if not plotenv.nonneg(loc) or loc > 1:
            raise BadInput("run %d: \"layout\" with a \"readdir_locality\" in [0, 1] is required" % i)
        layouts.append({"files": files, "order": r["order"], "churned": r["churned"], "locality": float(loc)})
    steps = pd.DataFrame(rows).groupby(["files", "order", "churned", "step"], as_index=False)["us"].mean()
    locality = pd.DataFrame(layouts).groupby(["files", "order", "churned"], as_index=False)["locality"].mean()
    return machine, steps, locality


def _title(machine, what):
    disk = machine.get("disk", "?")
    cache = machine.get("cache_bytes")
    extra = ", cache %d MiB" % (cache >> 20) if isinstance(cache, int) and not isinstance(cache, bool) else ""
    return "largedir: %s (disk %s%s, cold cache)" % (what, disk, extra)


def _line(ax, x, y, order):
    marker, size = MARKERS[order]
    ax.plot(x, y, marker=marker, markersize=size, color=COLOURS[order], label=order)


def _empty(ax, text):
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, fontsize=9, color="grey")


def _order_lines(ax, sub, title, state, column):
    """Titles the panel and draws `column` of `sub` against N, one line per
    order; False, with a note on the panel, when `sub` has no runs."""
    ax.set_title(title, fontsize=9)
    if sub.empty:
        _empty(ax, "no %s runs" % state)
        return False
    for order in ORDERS:
        line = sub[sub["order"] == order].sort_values("files")
        if not line.empty:
            _line(ax, line["files"], line[column], order)
    return True


def _per_file_grid(machine, df, steps, what, outdir, name, written, target):
    """Rows fresh / churned, one column per step; y = modeled µs per file
    against N, one line per order; with `target`, the 1.2x band over the
    offset order's smallest size."""
    fig, axes = plt.subplots(len(STATES), len(steps), figsize=(5.2 * len(steps), 3.8 * len(STATES)),
                             squeeze=False)
    for row, (churned, state) in zip(axes, STATES):
        for ax, step in zip(row, steps):
            sub = df[(df["churned"] == churned) & (df["step"] == step)]
            if not _order_lines(ax, sub, "%s, %s" % (step, state), state, "us"):
                continue
            top = sub["us"].max()
            base = sub[sub["order"] == "offset"].sort_values("files")
            if target and not base.empty:
                first = base.iloc[0]
                top = max(top, TARGET_FACTOR * first["us"])
                ax.axhspan(first["us"], TARGET_FACTOR * first["us"], color="grey", alpha=0.12, lw=0)
                ax.axhline(TARGET_FACTOR * first["us"], color="grey", ls="--", lw=1,
                           label="%.1fx offset at N=%d" % (TARGET_FACTOR, first["files"]))
            ax.set_xscale("log")
            ax.set_ylim(0, top * 1.1 if top > 0 else 1)
            ax.set_xlabel("files in the directory")
            ax.set_ylabel("modeled µs per file")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(_title(machine, what), fontsize=10)
    fig.tight_layout()
    plotenv.save(fig, outdir, name, written)


def draw(data, outdir, written):
    machine, df, loc = data

    _per_file_grid(machine, df, ["cp -a", "rm -rf"], "modeled time per file of cp -a and rm -rf",
                   outdir, "largedir_per_file.png", written, target=True)
    _per_file_grid(machine, df, ["tar", "ls"], "modeled time per file of tar and ls",
                   outdir, "largedir_tar.png", written, target=False)

    fig, axes = plt.subplots(1, len(STATES), figsize=(5.2 * len(STATES), 4), squeeze=False)
    low = min(0.4, loc["locality"].min() - 0.02)
    for ax, (churned, state) in zip(axes[0], STATES):
        sub = loc[loc["churned"] == churned]
        if not _order_lines(ax, sub, state, state, "locality"):
            continue
        ax.axhline(LOCALITY_TARGET, color="black", ls=":", lw=1, label="target (%.2f)" % LOCALITY_TARGET)
        ax.set_xscale("log")
        ax.set_ylim(low, 1.01)
        ax.set_xlabel("files in the directory")
        ax.set_ylabel("readdir locality (0.5 random, 1.0 inode order)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower left")
    fig.suptitle(_title(machine, "readdir locality of the directory before ls"), fontsize=10)
    fig.tight_layout()
    plotenv.save(fig, outdir, "largedir_locality.png", written)


if __name__ == "__main__":
    sys.exit(plotenv.main(sys.argv, load, draw))
