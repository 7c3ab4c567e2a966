#!/usr/bin/env python3
"""Plots the in-process dirhash benchmark in the manner of Figures 2-6 of
"Tuning FreeBSD's FFS / dirhash" (2002): microseconds per create, remove,
sequential stat, random stat and stat of a missing name, with the directory
index (dirhash) and without it (linear scan); for large directories (x =
entries) and small ones (x = directory size in bytes). Also the index's
memory per directory byte and the entries examined per operation.

usage: python3 analysis/plot_dirhash.py RESULTS.json OUTDIR

Input schema:
  {"config": {...},
   "points": [{"mode": "dirhash"|"linear", "range": "large"|"small",
               "entries": int, "dir_bytes": int, "op": OP, "ops": int,
               "us_per_op": float, "entries_scanned_per_op": float}],
   "memory": [{"entries": int, "dir_bytes": int, "hash_bytes": int,
               "bytes_per_dir_byte": float}],
   "build":  [{"entries": int, "dir_bytes": int, "us": float}]}
with OP one of create, remove, stat_seq, stat_random, stat_missing.
Writes fig2_create.png .. fig6_stat_missing.png, memory.png, scanned.png.
"""
import json
import os
import sys

import plotenv  # noqa: E402

matplotlib, pd = plotenv.load(__file__)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

OPS = [
    ("create", "fig2_create.png", "Figure 2: cost per create"),
    ("remove", "fig3_remove.png", "Figure 3: cost per remove"),
    ("stat_seq", "fig4_stat_seq.png", "Figure 4: cost per sequential stat"),
    ("stat_random", "fig5_stat_random.png", "Figure 5: cost per random stat"),
    ("stat_missing", "fig6_stat_missing.png", "Figure 6: cost per stat of a missing name"),
]
OP_NAMES = [op for op, _, _ in OPS]
MODES = {"dirhash": dict(marker="o", color="tab:blue", label="dirhash"),
         "linear": dict(marker="s", color="tab:red", label="linear scan")}
RANGES = ("large", "small")
PAPER_BYTES_PER_DIR_BYTE = 0.507
SMALL_XMAX = 8192

POINT_FIELDS = {"mode": str, "range": str, "entries": int, "dir_bytes": int, "op": str,
                "ops": int, "us_per_op": float, "entries_scanned_per_op": float}
MEMORY_FIELDS = {"entries": int, "dir_bytes": int, "hash_bytes": int,
                 "bytes_per_dir_byte": float}
BUILD_FIELDS = {"entries": int, "dir_bytes": int, "us": float}


BadInput = plotenv.BadInput


def _frame(doc, key, fields, required_nonempty):
    rows = doc.get(key)
    if rows is None:
        raise BadInput('no "%s" list' % key)
    if not isinstance(rows, list):
        raise BadInput('"%s" is not a list' % key)
    if required_nonempty and not rows:
        raise BadInput('"%s" is empty' % key)
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise BadInput("%s[%d] is not an object" % (key, i))
        for name, kind in fields.items():
            if name not in row:
                raise BadInput('%s[%d] has no "%s"' % (key, i, name))
            v = row[name]
            if kind is str:
                ok = isinstance(v, str)
            else:  # numbers; JSON ints are fine where floats are expected
                ok = isinstance(v, (int, float)) and not isinstance(v, bool)
            if not ok:
                raise BadInput("%s[%d].%s is not a %s: %r"
                               % (key, i, name, "string" if kind is str else "number", v))
    return pd.DataFrame(rows, columns=list(fields)) if rows else pd.DataFrame(columns=list(fields))


def load(path):
    doc = plotenv.read_json(path)
    if not isinstance(doc, dict):
        raise BadInput("top level is not an object")
    if "config" in doc and not isinstance(doc["config"], dict):
        raise BadInput('"config" is not an object')
    points = _frame(doc, "points", POINT_FIELDS, True)
    memory = _frame(doc, "memory", MEMORY_FIELDS, False)
    build = _frame(doc, "build", BUILD_FIELDS, False)
    for col, allowed in (("mode", MODES), ("range", RANGES), ("op", OP_NAMES)):
        bad = sorted(set(points[col]) - set(allowed))
        if bad:
            raise BadInput('points: unknown %s %s (expected one of %s)'
                           % (col, ", ".join(map(repr, bad)), ", ".join(allowed)))
    return doc.get("config", {}), points, memory, build


def _kilo(x, _pos=None):
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        v = x / 1000
        return ("%dk" % v) if v == int(v) else ("%.1fk" % v)
    return "%g" % x


def _kib(x, _pos=None):
    if x == 0:
        return "0"
    v = x / 1024
    return ("%dK" % v) if v == int(v) else ("%.1fK" % v)


def _log_y(ax, values):
    """Log y; symlog when some value is zero (nothing scanned, say)."""
    values = [v for v in values if v == v]
    if not values:
        return
    positive = [v for v in values if v > 0]
    if positive and len(positive) == len(values):
        ax.set_yscale("log")
    elif positive:
        ax.set_yscale("symlog", linthresh=min(1.0, min(positive)))
        ax.set_ylim(bottom=0)


def _no_data(ax):
    ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes, color="grey")


def _series(df, x, y):
    """Mean of y per (mode, x), sorted by x; repeated measurements average."""
    return {mode: g.groupby(x, as_index=False)[y].mean().sort_values(x)
            for mode, g in df.groupby("mode")}


def _draw_modes(ax, df, x, y):
    for mode, s in sorted(_series(df, x, y).items(), key=lambda kv: list(MODES).index(kv[0])):
        st = MODES[mode]
        ax.plot(s[x], s[y], marker=st["marker"], color=st["color"], label=st["label"],
                markersize=4, linewidth=1.3)


def _config_note(fig, config):
    if not config:
        return
    text = ", ".join("%s=%s" % (k, json.dumps(v) if not isinstance(v, str) else v)
                     for k, v in config.items())
    if len(text) > 160:
        text = text[:157] + "..."
    fig.text(0.01, 0.005, text, fontsize=7, color="grey", ha="left", va="bottom")


def _small_ticks(xmax, fine, coarse):
    """Ticks of a directory-size axis in bytes: every `fine` bytes up to
    twice SMALL_XMAX, else every `coarse`."""
    step = fine if xmax <= 2 * SMALL_XMAX else coarse
    return range(0, int(xmax) + 1, step)


def op_figure(points, op, title, config):
    """The figure of one operation, open (plot_op writes it). Each x axis
    spans the data: from 0 to the largest directory measured and a margin
    of 2%, so that a run that stops at 50,000 entries is not drawn on an
    axis to 200,000."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    d = points[points["op"] == op]
    large, small = d[d["range"] == "large"], d[d["range"] == "small"]

    left.set_title("large directories")
    left.set_xlabel("directory size (entries)")
    left.set_ylabel("microseconds per operation (log)")
    if large.empty:
        _no_data(left)
    else:
        _draw_modes(left, large, "entries", "us_per_op")
        _log_y(left, large["us_per_op"])
        left.set_xlim(0, large["entries"].max() * 1.02)
        left.xaxis.set_major_formatter(FuncFormatter(_kilo))
        left.legend()
    left.grid(True, which="major", alpha=0.3)

    right.set_title("small directories")
    right.set_xlabel("directory size (bytes)")
    right.set_ylabel("microseconds per operation")
    if small.empty:
        _no_data(right)
    else:
        _draw_modes(right, small, "dir_bytes", "us_per_op")
        xmax = small["dir_bytes"].max()
        right.set_xlim(0, xmax * 1.02)
        right.set_xticks(_small_ticks(xmax, 1024, 4096))
        right.xaxis.set_major_formatter(FuncFormatter(_kib))
        right.set_ylim(bottom=0)
        right.legend()
    right.grid(True, alpha=0.3)

    fig.suptitle(title)
    _config_note(fig, config)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    return fig


def plot_op(points, op, title, config, outdir, name, written):
    plotenv.save(op_figure(points, op, title, config), outdir, name, written)


def plot_memory(memory, build, config, outdir, written):
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.6))
    left.set_title("index memory")
    left.set_xlabel("directory size (bytes)")
    left.set_ylabel("index size (bytes)")
    m = memory[memory["dir_bytes"] > 0].sort_values("dir_bytes") if not memory.empty else memory
    if m.empty:
        _no_data(left)
    else:
        mean = m["bytes_per_dir_byte"].mean()
        left.plot(m["dir_bytes"], m["hash_bytes"], marker="o", markersize=4, color="tab:blue",
                  label="measured (mean %.3f bytes/byte)" % mean)
        lo, hi = m["dir_bytes"].min(), m["dir_bytes"].max()
        left.plot([lo, hi], [lo * PAPER_BYTES_PER_DIR_BYTE, hi * PAPER_BYTES_PER_DIR_BYTE],
                  linestyle="--", color="grey", label="paper: %.3f bytes/byte" % PAPER_BYTES_PER_DIR_BYTE)
        if hi / lo >= 100:
            left.set_xscale("log")
            left.set_yscale("log")
        left.legend()
    left.grid(True, which="major", alpha=0.3)

    right.set_title("index build (first lookup)")
    right.set_xlabel("directory size (entries)")
    right.set_ylabel("microseconds per build")
    b = build.sort_values("entries") if not build.empty else build
    if b.empty:
        _no_data(right)
    else:
        b = b.groupby("entries", as_index=False)["us"].mean()
        right.plot(b["entries"], b["us"], marker="o", markersize=4, color="tab:blue")
        if b["entries"].max() / max(1, b["entries"].min()) >= 100 and (b["us"] > 0).all():
            right.set_xscale("log")
            right.set_yscale("log")
        else:
            right.xaxis.set_major_formatter(FuncFormatter(_kilo))
    right.grid(True, which="major", alpha=0.3)

    fig.suptitle("dirhash memory and build cost")
    _config_note(fig, config)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    plotenv.save(fig, outdir, "memory.png", written)


def plot_scanned(points, config, outdir, written):
    fig, axes = plt.subplots(2, len(OPS), figsize=(4 * len(OPS), 7.5), squeeze=False)
    for col, (op, _, title) in enumerate(OPS):
        for row, rng in enumerate(RANGES):
            ax = axes[row][col]
            d = points[(points["op"] == op) & (points["range"] == rng)]
            x = "entries" if rng == "large" else "dir_bytes"
            ax.set_title("%s, %s dirs" % (op, rng), fontsize=10)
            ax.set_xlabel("directory size (%s)" % ("entries" if rng == "large" else "bytes"))
            if col == 0:
                ax.set_ylabel("entries examined per op")
            if d.empty:
                _no_data(ax)
                continue
            _draw_modes(ax, d, x, "entries_scanned_per_op")
            _log_y(ax, d["entries_scanned_per_op"])
            if rng == "large":
                ax.set_xlim(0, d["entries"].max() * 1.02)
                ax.xaxis.set_major_formatter(FuncFormatter(_kilo))
            else:
                xmax = d["dir_bytes"].max()
                ax.set_xlim(0, xmax * 1.02)
                ax.set_xticks(_small_ticks(xmax, 2048, 8192))
                ax.xaxis.set_major_formatter(FuncFormatter(_kib))
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle("directory entries examined per operation")
    _config_note(fig, config)
    fig.tight_layout(rect=(0, 0.02, 1, 0.96))
    plotenv.save(fig, outdir, "scanned.png", written)


def draw(data, outdir, written):
    config, points, memory, build = data
    for op, name, title in OPS:
        plot_op(points, op, title, config, outdir, name, written)
    plot_memory(memory, build, config, outdir, written)
    plot_scanned(points, config, outdir, written)


if __name__ == "__main__":
    sys.exit(plotenv.main(sys.argv, load, draw))
