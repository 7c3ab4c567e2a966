#!/usr/bin/env python3
"""Plots the maildir workload (ufs-bench `maildir`, after the 2008 dirhash
dynamic-memory work): seconds per phase for each dirhash budget profile, and
the dirhash memory in use over the run.

usage: python3 analysis/plot_maildir.py RESULTS.json OUTDIR

Input: a JSON list of MaildirReport objects, one per profile:
  [{"profile": str,
    "config": {"dirhash": {"maxmem": int, ...}, "pressure": null|{...}, ...},
    "phases": [{"name": str, "seconds": float, "ops": int,
                "ops_start": int, "entries_scanned": int, "built": int,
                "mem_peak_phase": int, ...}],
    "timeline": [[ops, mem_in_use_bytes], ...],
    "total_seconds": float, "fsck_clean": bool, ...}, ...]
Only "profile", "phases" (name, seconds) and "timeline" are required.
Writes maildir_times.png and maildir_memory.png.
"""
import os
import sys

import plotenv  # noqa: E402

matplotlib, pd = plotenv.load(__file__)
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, MultipleLocator  # noqa: E402

MIB = 1 << 20
# Colours of the three standard profiles; others get the next free colour.
KNOWN = {"fixed-2MiB": "tab:red", "large-64MiB": "tab:blue", "growing-64MiB+lowmem": "tab:green"}
SPARE = ["tab:orange", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan", "tab:gray"]


BadInput = plotenv.BadInput


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def load(path):
    """(reports, phases frame, timeline frame) from a results file."""
    doc = plotenv.read_json(path)
    if isinstance(doc, dict):  # a single report is accepted too
        doc = [doc]
    if not isinstance(doc, list) or not doc:
        raise BadInput("expected a non-empty list of maildir reports")
    phase_rows, time_rows, seen = [], [], set()
    for i, r in enumerate(doc):
        if not isinstance(r, dict):
            raise BadInput("report %d is not an object" % i)
        prof = r.get("profile")
        if not isinstance(prof, str) or not prof:
            raise BadInput('report %d has no "profile" string' % i)
        if prof in seen:
            raise BadInput("profile %r appears twice" % prof)
        seen.add(prof)
        phases = r.get("phases")
        if not isinstance(phases, list) or not phases:
            raise BadInput('%s: no "phases" list' % prof)
        for j, p in enumerate(phases):
            if not isinstance(p, dict):
                raise BadInput("%s: phase %d is not an object" % (prof, j))
            if not isinstance(p.get("name"), str):
                raise BadInput('%s: phase %d has no "name"' % (prof, j))
            if not _is_num(p.get("seconds")):
                raise BadInput('%s: phase %s has no numeric "seconds"' % (prof, p["name"]))
            row = {"profile": prof, "order": j, "phase": p["name"], "seconds": float(p["seconds"])}
            for k in ("ops", "ops_start", "entries_scanned", "built", "lookups_linear",
                      "mem_peak_phase"):
                row[k] = float(p[k]) if _is_num(p.get(k)) else float("nan")
            phase_rows.append(row)
        timeline = r.get("timeline")
        if not isinstance(timeline, list):
            raise BadInput('%s: no "timeline" list' % prof)
        for j, pt in enumerate(timeline):
            if not (isinstance(pt, (list, tuple)) and len(pt) == 2 and _is_num(pt[0]) and _is_num(pt[1])):
                raise BadInput("%s: timeline[%d] is not [ops, bytes]: %r" % (prof, j, pt))
            time_rows.append({"profile": prof, "ops": pt[0], "mem": pt[1]})
    phases = pd.DataFrame(phase_rows)
    timeline = pd.DataFrame(time_rows, columns=["profile", "ops", "mem"])
    return doc, phases, timeline


def _colours(profiles):
    out, spare = {}, iter(SPARE)
    for p in profiles:
        out[p] = KNOWN.get(p) or next(spare, "black")
    return out


def _mib(x, _pos=None):
    v = x / MIB
    return "0" if x == 0 else (("%d" % v) if v == int(v) else ("%.1f" % v))


def _kilo(x, _pos=None):
    if abs(x) >= 1e6:
        return "%gM" % (x / 1e6)
    if abs(x) >= 1e3:
        return "%gk" % (x / 1e3)
    return "%g" % x


def _note(fig, reports):
    """Sizes of the run, from the first report's config."""
    c = reports[0].get("config")
    if not isinstance(c, dict):
        return
    keys = ("maildirs", "msgs_per_dir", "deliveries", "other_tree_files", "imap_passes", "seed")
    text = ", ".join("%s=%s" % (k, c[k]) for k in keys if k in c)
    clean = [r["profile"] for r in reports if r.get("fsck_clean") is False]
    if clean:
        text += "; fsck NOT clean: " + ", ".join(clean)
    fig.text(0.01, 0.005, text, fontsize=7, color="grey", ha="left", va="bottom")


def plot_times(reports, phases, outdir, written):
    profiles = [r["profile"] for r in reports]
    colours = _colours(profiles)
    # Phases in the order they ran (first appearance over all reports).
    order = list(dict.fromkeys(phases.sort_values("order", kind="stable")["phase"]))
    secs = phases.pivot_table(index="phase", columns="profile", values="seconds", aggfunc="sum")
    secs = secs.reindex(index=order, columns=profiles)
    totals = phases.groupby("profile")["seconds"].sum().reindex(profiles)

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [3, 1]})
    n = len(profiles)
    width = 0.8 / n
    x = list(range(len(order)))
    for k, prof in enumerate(profiles):
        xs = [i - 0.4 + width * (k + 0.5) for i in x]
        vals = secs[prof].fillna(0).tolist()
        bars = left.bar(xs, vals, width=width, color=colours[prof], label=prof)
        for b, v in zip(bars, vals):
            if v > 0:
                left.annotate("%.2f" % v if v < 10 else "%.1f" % v, (b.get_x() + b.get_width() / 2, v),
                              ha="center", va="bottom", fontsize=7, xytext=(0, 1),
                              textcoords="offset points")
    left.set_xticks(x)
    left.set_xticklabels(order)
    left.set_ylabel("seconds")
    left.set_title("time per phase")
    left.legend(fontsize=8)
    left.grid(True, axis="y", alpha=0.3)

    bars = right.bar(range(n), totals.fillna(0).tolist(), color=[colours[p] for p in profiles])
    for b, v in zip(bars, totals.fillna(0).tolist()):
        right.annotate("%.2f" % v, (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom",
                       fontsize=8, xytext=(0, 1), textcoords="offset points")
    right.set_xticks(range(n))
    right.set_xticklabels(profiles, rotation=20, ha="right", fontsize=8)
    right.set_title("total")
    right.grid(True, axis="y", alpha=0.3)

    fig.suptitle("maildir workload: time per phase by dirhash budget")
    _note(fig, reports)
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    plotenv.save(fig, outdir, "maildir_times.png", written)


def plot_memory(reports, phases, timeline, outdir, written):
    profiles = [r["profile"] for r in reports]
    colours = _colours(profiles)
    fig, ax = plt.subplots(figsize=(11, 5))
    top = 0
    styles = ["-", "--", "-.", ":"]
    for k, prof in enumerate(profiles):
        t = timeline[timeline["profile"] == prof].sort_values("ops", kind="stable")
        if t.empty:
            continue
        # Dashes keep identical curves (small runs, all within budget) apart.
        ax.step(t["ops"], t["mem"], where="post", color=colours[prof], label=prof, linewidth=1.3,
                linestyle=styles[k % len(styles)])
        top = max(top, t["mem"].max())
    if top == 0:
        ax.text(0.5, 0.5, "no memory samples", ha="center", va="center", transform=ax.transAxes,
                color="grey")
    ymax = max(top * 1.12, MIB)
    # Budgets that fall inside the plot (the 2 MiB one, typically).
    budgets = {}
    for r in reports:
        m = (r.get("config") or {}).get("dirhash", {}).get("maxmem")
        if _is_num(m) and 0 < m <= ymax:
            budgets.setdefault(m, []).append(r["profile"])
    for m, profs in budgets.items():
        ax.axhline(m, linestyle="--", color="grey", linewidth=0.8)
        ax.annotate("budget %s MiB (%s)" % (_mib(m), ", ".join(profs)), (0, m), xycoords=("axes fraction", "data"),
                    xytext=(4, 2), textcoords="offset points", fontsize=7, color="grey")
    # Phase boundaries, from the first report that has them (the operation
    # sequence is the same for every profile of one configuration).
    first = phases[phases["profile"] == profiles[0]].sort_values("order")
    if first["ops_start"].notna().all():
        for _, p in first.iterrows():
            ax.axvline(p["ops_start"], color="black", alpha=0.15, linewidth=0.8)
            ax.annotate(p["phase"], (p["ops_start"], 1.0), xycoords=("data", "axes fraction"),
                        xytext=(3, -10), textcoords="offset points", fontsize=8, color="dimgrey")
    ax.set_ylim(0, ymax)
    step = next((s for s in (0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32, 64, 128) if ymax / (s * MIB) <= 10), 256)
    ax.yaxis.set_major_locator(MultipleLocator(step * MIB))
    ax.set_xlim(left=0)
    ax.yaxis.set_major_formatter(FuncFormatter(_mib))
    ax.xaxis.set_major_formatter(FuncFormatter(_kilo))
    ax.set_xlabel("engine operations")
    ax.set_ylabel("dirhash memory in use (MiB)")
    ax.set_title("dirhash memory over the maildir workload")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 0.93))
    _note(fig, reports)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    plotenv.save(fig, outdir, "maildir_memory.png", written)


def draw(data, outdir, written):
    reports, phases, timeline = data
    plot_times(reports, phases, outdir, written)
    plot_memory(reports, phases, timeline, outdir, written)


if __name__ == "__main__":
    sys.exit(plotenv.main(sys.argv, load, draw))
