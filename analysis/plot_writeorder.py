#!/usr/bin/env python3
"""Plots the write-mode benchmark (ufskit `bench writeorder`): for each
phase (files create/remove; MH folder create, pack, remove) the modeled
seconds of the phase with its final sync under each write mode (normal,
sync, async, softdep), bars side by side on a log scale; a thin dark bar
inside each shows the phase alone (before its sync), and each panel's title
gives normal/softdep and softdep/async.

usage: python3 analysis/plot_writeorder.py RESULTS.json OUTDIR

Input: {"config": {"disk": str, "profile": str, "files": int,
  "messages": int, "cache_bytes": int, ...} (optional),
  "runs": [{"workload": "files"|"mh", "mode": "normal"|"sync"|"async"|
  "softdep", "phases": [{"name": "create"|"remove" (files) or
  "create"|"pack"|"remove" (mh), "modeled_ms": float,
  "modeled_sync_ms": float, ...}, ...], "fsck_clean": bool, ...}, ...]}
Repeated runs of one configuration are averaged. A mode missing from a
phase leaves a gap; a time of zero is drawn as no bar (log scale).
Writes writeorder.png.
"""
import sys

import plotenv  # noqa: E402

matplotlib, pd = plotenv.load(__file__)
import matplotlib.pyplot as plt  # noqa: E402

BadInput = plotenv.BadInput
MODES = ["normal", "sync", "async", "softdep"]
COLOURS = {"normal": "tab:red", "sync": "tab:purple", "async": "tab:grey", "softdep": "tab:blue"}
PHASES = {"files": ["create", "remove"], "mh": ["create", "pack", "remove"]}
PANELS = [(w, p) for w in ("files", "mh") for p in PHASES[w]]


def load(path):
    doc = plotenv.read_json(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("runs"), list) or not doc["runs"]:
        raise BadInput("expected an object with a non-empty \"runs\" list")
    config = doc.get("config", {})
    if not isinstance(config, dict):
        raise BadInput("\"config\" must be an object")
    rows = []
    for i, r in enumerate(doc["runs"]):
        if not isinstance(r, dict):
            raise BadInput("run %d is not an object" % i)
        w = r.get("workload")
        if w not in PHASES:
            raise BadInput("run %d: \"workload\" must be one of %s (got %r)" % (i, "/".join(PHASES), w))
        if r.get("mode") not in MODES:
            raise BadInput("run %d: \"mode\" must be one of %s (got %r)" % (i, "/".join(MODES), r.get("mode")))
        phases = r.get("phases")
        if not isinstance(phases, list) or not phases:
            raise BadInput("run %d: a non-empty \"phases\" list is required" % i)
        seen = set()
        for j, p in enumerate(phases):
            name = p.get("name") if isinstance(p, dict) else p
            if name not in PHASES[w]:
                raise BadInput("run %d phase %d: \"name\" must be one of %s for workload %s (got %r)"
                               % (i, j, ", ".join(PHASES[w]), w, name))
            if name in seen:
                raise BadInput("run %d: phase %r appears twice" % (i, name))
            seen.add(name)
            for key in ("modeled_ms", "modeled_sync_ms"):
                if not plotenv.nonneg(p.get(key)):
                    raise BadInput("run %d phase %r: \"%s\" must be a non-negative number" % (i, name, key))
            if p["modeled_ms"] > p["modeled_sync_ms"]:
                raise BadInput("run %d phase %r: \"modeled_ms\" exceeds \"modeled_sync_ms\" (the phase "
                               "alone cannot cost more than the phase with its sync)" % (i, name))
            rows.append({"workload": w, "phase": name, "mode": r["mode"],
                         "alone": p["modeled_ms"] / 1e3, "total": p["modeled_sync_ms"] / 1e3})
    df = pd.DataFrame(rows).groupby(["workload", "phase", "mode"], as_index=False)[["alone", "total"]].mean()
    return config, df


def _title(config):
    parts = []
    disk = config.get("disk")
    if isinstance(disk, str):
        parts.append("disk %s" % disk)
    for key, what in (("files", "files"), ("messages", "messages")):
        v = config.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            parts.append("%d %s" % (v, what))
    cache = config.get("cache_bytes")
    if isinstance(cache, int) and not isinstance(cache, bool):
        parts.append("cache %d MiB" % (cache >> 20))
    if config.get("vmiodir") is False:
        parts.append("vmiodir off")
    extra = " (%s)" % ", ".join(parts) if parts else ""
    return "writeorder: modeled seconds per phase with its sync, by write mode%s" % extra


def _ratio(value, a, b):
    if a is None or b is None or b <= 0:
        return None
    return value(a, b)


def draw(data, outdir, written):
    config, df = data
    fig, axes = plt.subplots(1, len(PANELS), figsize=(3.3 * len(PANELS), 4.4), squeeze=False)
    positive = df[df["total"] > 0]["total"]
    low = positive.min() / 3 if not positive.empty else 1e-3
    high = positive.max() * 3 if not positive.empty else 1.0
    for ax, (w, phase) in zip(axes[0], PANELS):
        sub = df[(df["workload"] == w) & (df["phase"] == phase)]
        totals = {}
        for k, mode in enumerate(MODES):
            row = sub[sub["mode"] == mode]
            if row.empty:
                continue
            total, alone = float(row["total"].iloc[0]), float(row["alone"].iloc[0])
            totals[mode] = total
            if total > 0:
                ax.bar(k, total, width=0.8, color=COLOURS[mode], alpha=0.85, label=mode)
                ax.text(k, total * 1.15, "%.3g" % total, ha="center", va="bottom", fontsize=7)
            if alone > 0:
                ax.bar(k, alone, width=0.25, color="black", alpha=0.6)
        title = "%s %s" % (w, phase)
        speed = _ratio(lambda a, b: a / b, totals.get("normal"), totals.get("softdep"))
        cost = _ratio(lambda a, b: a / b, totals.get("softdep"), totals.get("async"))
        notes = []
        if speed is not None:
            notes.append("normal/softdep %.1fx" % speed)
        if cost is not None:
            notes.append("softdep/async %.2fx" % cost)
        ax.set_title(title + ("\n" + ", ".join(notes) if notes else ""), fontsize=8)
        if sub.empty:
            ax.text(0.5, 0.5, "no runs", ha="center", va="center", transform=ax.transAxes,
                    fontsize=9, color="grey")
        ax.set_yscale("log")
        ax.set_ylim(low, high * 2)
        ax.set_xticks(range(len(MODES)))
        ax.set_xticklabels(MODES, fontsize=8, rotation=30)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    axes[0][0].set_ylabel("modeled seconds (phase + sync; dark: phase alone)")
    fig.suptitle(_title(config), fontsize=9)
    fig.tight_layout()
    plotenv.save(fig, outdir, "writeorder.png", written)


if __name__ == "__main__":
    sys.exit(plotenv.main(sys.argv, load, draw))
