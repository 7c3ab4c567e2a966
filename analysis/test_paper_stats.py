#!/usr/bin/env python3
"""Test for paper_stats.py (seed 004's Table 1 rank tables, Tables 2-3
linear models, Figures 8-10) on synthetic runs whose effects are known:
- two tests drawn from chosen main effects and one chosen interaction each,
  plus Gaussian noise (fixed seed, four runs per combination): the model
  recovers the chosen coefficients, in seconds and in percentage points of
  the unoptimised time, and reports exactly those as significant (the zero
  ones are not);
- a small exact case (two factors, known means): rank order, Time%, the
  standard error and n of the rank table;
- the paper's own Table 1 means, one run each: Time% as printed in Table 1,
  Table 2's coefficients as exact effects (no residual dof, no crash), the
  effect order and the uppermost path of Figures 8 and 10;
- a best combination other than all-on; a missing combination;
- the tables rounded: a fixed number of significant digits, no exponent,
  float noise (an exact fit's -6e-13 of a zero effect) shown as 0, p-values
  as <0.0001; headings in words with the unit (modeled or wall-clock
  seconds, the clock read from paper.json);
- Figures 8 and 9 with no label overlapping another or leaving its axes
  and none left out in the paper's four-factor form (also andrew-grep's
  shape, where eight edges share one gain), log axes ticked x1, x2, ...;
  Figure 10's x axis ending at its longest note; the overlap check itself
  catching two labels in one place;
- every figure written as a non-empty PNG; the CLI end to end on CSV and
  JSON, with an extra factor, and bad inputs rejected with a message.
Plain python; exits non-zero on failure.
usage: python3 analysis/test_paper_stats.py"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile

import plotenv

plotenv.load(__file__)  # re-runs this under the Python that has pandas
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import paper_stats as ps  # noqa: E402
import plottest  # noqa: E402
from plottest import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "paper_stats.py")
FACTORS = ["su", "dp", "vm", "dh"]
RUNS = 4
# Seconds: the unoptimised time, then the coefficients of the chosen terms
# (every other term is zero), and the noise's standard deviation.
MODELS = {
    # Shaped like the paper's Table 2: three savings, an overlap of two.
    "build": dict(base=200.0, noise=0.5, terms={("su",): -80.0, ("dp",): -30.0, ("vm",): -4.0,
                                                 ("su", "dp"): 10.0}),
    # Shaped like Table 3: dirhash helps only with soft updates on.
    "mailbox": dict(base=50.0, noise=0.02, terms={("su",): -49.0, ("su", "dh"): -0.6}),
}
SIGNIFICANT = {"build": {"base", "SU", "DP", "VM", "DP:SU"}, "mailbox": {"base", "SU", "DH:SU"}}
# The paper's Table 1 (Buildworld): SU DP VM DH and the mean seconds, Time%.
TABLE1 = [("1111", 2032.85, 46.78), ("1110", 2058.92, 47.38), ("1100", 2067.24, 47.57),
          ("1101", 2118.72, 48.76), ("1011", 2386.64, 54.92), ("1010", 2389.99, 55.00),
          ("1001", 2479.80, 57.07), ("1000", 2489.56, 57.29), ("0111", 3681.77, 84.73),
          ("0110", 3697.03, 85.08), ("0100", 3724.66, 85.72), ("0101", 3749.88, 86.30),
          ("0011", 4260.20, 98.04), ("0010", 4262.49, 98.09), ("0000", 4345.38, 100.00),
          ("0001", 4348.22, 100.07)]
# Table 2's coefficients (Δ %Time) as the exact effects of those means.
TABLE2 = {"base": 100.00, "SU": -42.71, "DP": -14.28, "VM": -1.91, "DP:SU": 4.57}


def combos(factors):
    k = len(factors)
    return [dict(zip(factors, ((i >> (k - 1 - j)) & 1 for j in range(k)))) for i in range(2 ** k)]


def synthetic(seed=4):
    rng = np.random.RandomState(seed)
    rows = []
    for test, m in MODELS.items():
        for c in combos(FACTORS):
            mean = m["base"] + sum(v for term, v in m["terms"].items() if all(c[f] for f in term))
            for r in range(RUNS):
                rows.append(dict(test=test, run=r, seconds=mean + rng.normal(0.0, m["noise"]), **c))
    return pd.DataFrame(rows)


def table1():
    return pd.DataFrame([dict(test="buildworld", run=0, seconds=t, **dict(zip(FACTORS, map(int, bits))))
                         for bits, t, _ in TABLE1])


def close(a, b, tol):
    return a is not None and b is not None and math.isfinite(a) and abs(a - b) <= tol


def check_model():
    df = synthetic()
    for test, m in MODELS.items():
        full = ps.fit_model(df, test, FACTORS)
        check(len(full) == 16, "%s: 16 coefficients (got %d)" % (test, len(full)))
        check(full.attrs["formula"] == "pct ~ su*dp*vm*dh", "%s: formula %r" % (test, full.attrs["formula"]))
        check(full.attrs["df_resid"] == 16 * (RUNS - 1),
              "%s: residual dof %r" % (test, full.attrs["df_resid"]))
        by = full.set_index("term")
        base = full.attrs["base_mean_s"]
        check(close(base, m["base"], 4 * m["noise"]), "%s: base mean %.3f near %.1f" % (test, base, m["base"]))
        check(close(by.loc["base", "estimate"], 100.0, 1e-9), "%s: base is 100%%" % test)
        for term in full["term"]:
            if term == "base":
                continue
            key = tuple(sorted(f.lower() for f in term.split(":")))
            want = sum(v for t, v in m["terms"].items() if tuple(sorted(t)) == key)
            tol = 5 * m["noise"] * math.sqrt(2 ** len(key) / RUNS)  # 5 standard errors
            got = by.loc[term, "estimate_s"]
            check(close(got, want, tol), "%s %s: %.3f s, want %.3f +- %.3f" % (test, term, got, want, tol))
            pct = by.loc[term, "estimate"]
            check(close(pct, 100.0 * want / m["base"], 100.0 * tol / m["base"] + 0.1),
                  "%s %s: %.3f %%, want %.3f" % (test, term, pct, 100.0 * want / m["base"]))
            check(by.loc[term, "se"] > 0, "%s %s: positive standard error" % (test, term))
        sig = ps.linear_model(df, test, FACTORS)
        check(set(sig["term"]) == SIGNIFICANT[test], "%s: significant terms %s, want %s (p: %s)"
              % (test, sorted(sig["term"]), sorted(SIGNIFICANT[test]),
                 dict(zip(full["term"], full["p"].round(5)))))
        check(list(sig["term"])[0] == "base", "%s: base row first" % test)
        check(sig.attrs["alpha"] == ps.PAPER_ALPHA == 0.001, "%s: the paper's alpha by default" % test)
        check(list(sig.columns[:4]) == ["term", "estimate", "se", "p"],
              "%s: columns %s" % (test, list(sig.columns)))
        zeros = full[~full["term"].isin(SIGNIFICANT[test])]
        check((zeros["p"] >= ps.PAPER_ALPHA).all(), "%s: every zero coefficient has p >= alpha" % test)
        loose = ps.linear_model(df, test, FACTORS, alpha=1.0)
        check(len(loose) == 16, "%s: alpha 1 keeps every coefficient (got %d)" % (test, len(loose)))
    # The same data as raw seconds: a model of seconds would put the base at
    # 200, not 100; the percentage model scales every estimate by 100/base.
    full = ps.fit_model(df, "build", FACTORS)
    ratio = full["estimate"] / full["estimate_s"]
    check(np.allclose(ratio, 100.0 / full.attrs["base_mean_s"]), "estimates in %% are 100/base times seconds")


def check_rank_exact():
    rows = [("00", [10.0, 12.0]), ("10", [4.0, 6.0]), ("01", [9.0, 9.0]), ("11", [2.2])]
    df = pd.DataFrame([dict(test="small", su=int(b[0]), dp=int(b[1]), run=i, seconds=t)
                       for b, ts in rows for i, t in enumerate(ts)])
    t = ps.rank_table(df, "small", None)  # default factors: those of su, dp, vm, dh present
    check(list(t["combination"]) == ["SU+DP", "SU", "DP", "none"], "rank order %s" % list(t["combination"]))
    check(list(t.index) == [1, 2, 3, 4], "ranks from 1")
    check(list(t["SU"]) == ["\u2022", "\u2022", "", ""] and list(t["DP"]) == ["\u2022", "", "\u2022", ""],
          "bullets %s %s" % (list(t["SU"]), list(t["DP"])))
    check("VM" not in t.columns and "DH" not in t.columns, "no columns for absent factors")
    want_pct = [100 * 2.2 / 11, 100 * 5 / 11, 100 * 9 / 11, 100.0]
    check(np.allclose(t["time_pct"], want_pct), "Time%% %s, want %s" % (list(t["time_pct"]), want_pct))
    check(np.allclose(t["mean_s"], [2.2, 5.0, 9.0, 11.0]), "means %s" % list(t["mean_s"]))
    check(list(t["n"]) == [1, 2, 2, 2], "n %s" % list(t["n"]))
    # none: sd sqrt(2), se 1 s = 100/11 %; DP: identical runs, se 0; n = 1: no se.
    check(close(t["se_s"].iloc[3], 1.0, 1e-12) and close(t["se_pct"].iloc[3], 100 / 11, 1e-9),
          "se of none: %r s, %r %%" % (t["se_s"].iloc[3], t["se_pct"].iloc[3]))
    check(close(t["se_s"].iloc[1], 1.0, 1e-12), "se of SU %r" % t["se_s"].iloc[1])
    check(t["se_s"].iloc[2] == 0.0 and math.isnan(t["se_s"].iloc[0]), "se of DP 0, of a single run NaN")
    md = ps.markdown_rank(t)
    check("| \u2022 | \u2022 | 2.200 | 20.00 |" in md, "markdown rank row (got:\n%s)" % md)
    # Identical runs: a standard error of exactly 0, shown as 0 (not 0.00 or -0).
    check("|  | \u2022 | 9.000 | 81.82 | 0 | 0 | 2 |" in md, "markdown rank row of identical runs:\n%s" % md)


def check_paper_table1():
    df = table1()
    t = ps.rank_table(df, "buildworld", FACTORS)
    got = [("".join("1" if r[ps.label(f)] else "0" for f in FACTORS), round(r["time_pct"], 2))
           for _, r in t.iterrows()]
    check(got == [(b, p) for b, _, p in TABLE1], "Table 1 reproduced (got %s)" % got)
    m = ps.linear_model(df, "buildworld", FACTORS)  # one run each: no residual dof
    check(len(m) == 16 and m["se"].isna().all() and m["p"].isna().all(),
          "single runs: every exact effect, no se or p (got %d rows)" % len(m))
    check("no residual degrees of freedom" in m.attrs["note"], "single runs noted: %r" % m.attrs["note"])
    by = m.set_index("term")["estimate"]
    for term, want in TABLE2.items():
        check(close(by[term], want, 0.006), "Table 2 %s: %.3f, want %.2f" % (term, by[term], want))
    check("Note: one run per combination" in ps.markdown_model(m), "markdown model carries the note")
    check(ps.effect_order(df, "buildworld", FACTORS) == FACTORS, "effect order SU, DP, VM, DH (got %s)"
          % ps.effect_order(df, "buildworld", FACTORS))
    s = ps.summary(df, "buildworld", FACTORS)
    check([p["combination"] for p in s["path"]] == ["none", "SU", "SU+DP", "SU+DP+VM", "SU+DP+VM+DH"],
          "uppermost path %s" % [p["combination"] for p in s["path"]])
    check(close(s["all_on"], 4345.38 / 2032.85, 1e-9) and s["best"] == "SU+DP+VM+DH",
          "all-on improvement %r, best %r" % (s["all_on"], s["best"]))


def check_best_not_all_on(tmp):
    # Dirhash costs 1 s whatever else is on: soft updates alone is best.
    means = {(0, 0): 10.0, (1, 0): 5.0, (0, 1): 11.0, (1, 1): 6.0}
    df = pd.DataFrame([dict(test="t", su=a, dh=b, run=r, seconds=v + 0.01 * r)
                       for (a, b), v in means.items() for r in range(3)])
    s = ps.summary(df, "t", ["su", "dh"])
    check([p["combination"] for p in s["path"]] == ["none", "SU", "SU+DH"], "path %s" % s["path"])
    check(s["best"] == "SU" and close(s["best_improvement"], 10.01 / 5.01, 1e-9),
          "best SU (got %s %r)" % (s["best"], s["best_improvement"]))
    check(close(s["all_on"], 10.01 / 6.01, 1e-9) and s["path"][-1]["gain"] < 1,
          "all-on %r, last step a loss %r" % (s["all_on"], s["path"][-1]["gain"]))
    e = ps.effects(df, "t", ["su", "dh"])
    check(close(e["dh"], math.sqrt(10.01 / 11.01 * 5.01 / 6.01), 1e-9), "dirhash effect %r" % e["dh"])
    out = os.path.join(tmp, "best.png")
    ps.plot_summary(df, ["t"], ["su", "dh"], out)
    check(plottest.png_ok(out) and os.path.getsize(out) > 1000, "Figure 10 with a dashed region is a PNG")


def check_missing_combination(tmp):
    df = synthetic()
    df = df[~((df["test"] == "build") & (df["su"] == 1) & (df["dp"] == 1) & (df["vm"] == 0) & (df["dh"] == 1))]
    m = ps.linear_model(df, "build", FACTORS)
    check(m.empty and "SU+DP+DH" in m.attrs["note"], "missing combination: no model, noted (%r)"
          % m.attrs["note"])
    check(len(ps.rank_table(df, "build", FACTORS)) == 15, "missing combination: 15 ranks")
    for fn, name in ((ps.plot_improvement, "f8.png"), (ps.plot_lattice, "f9.png")):
        p = fn(df, "build", FACTORS, os.path.join(tmp, name))
        check(plottest.png_ok(p), "%s with a combination missing is a PNG" % name)
    check("not fitted" in ps.markdown_model(m), "markdown of an unfitted model says so")


# A number in exponent form or a negative zero: what float noise looks like
# when printed unrounded (the report had -5.799e-13 in its model tables).
FLOAT_NOISE = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?[eE][-+]?\d+\b|(?<![\w.])-0(?:\.0+)?(?![\d.])")


def exact(effects, base=444.39, test="exact"):
    """One run per combination of FACTORS with multiplicative `effects`
    ({factor: factor of time}) and nothing else: the exact fit leaves float
    noise (~1e-13) where an effect is zero."""
    rows = []
    for c in combos(FACTORS):
        t = base
        for f, v in effects.items():
            if c[f]:
                t *= v
        rows.append(dict(test=test, run=0, seconds=t, **c))
    return pd.DataFrame(rows)


def check_formatting():
    """Rounded tables: significant digits, no exponent, float noise as 0."""
    cases = [(ps.sig(-6.405e-13, 4, 444.39), "0"), (ps._num(-6.405e-13, 444.39), "0"),
             (ps._num(5.368e-13, 444.39), "0"), (ps._pct(-1e-13), "0"), (ps._pct(-0.004), "0.00"),
             (ps._pct(-42.712), "-42.71"), (ps._num(1234.567), "1234.57"), (ps._num(0.000123456), "0.0001235"),
             (ps._num(-0.0017903, 444.39), "-0.001790"), (ps.sig(0.000123456, 4), "0.0001235"),
             (ps._p(1e-15), "<0.0001"), (ps._p(0.00042), "0.00042"), (ps._p(0.0123), "0.012"),
             (ps._p(float("nan")), "\u2014"), (ps._num(None), "\u2014"), (ps.times(1234.5), "\u00d71234"),
             (ps.times(3.006), "\u00d73.01"), (ps.times(0.98463), "\u00d70.985")]
    for got, want in cases:
        check(got == want, "formatted %r, want %r" % (got, want))
    check(ps.is_noise(1e-13, 444.0) and not ps.is_noise(1e-6, 444.0) and not ps.is_noise(1e-13, None),
          "float noise is relative to the table's scale")
    # The model of an exact run where only SU acts: every other coefficient
    # is float noise, printed as 0, with no exponent anywhere.
    df = exact({"su": 0.5})
    full = ps.fit_model(df, "exact", FACTORS)
    noisy = [t for t, e in zip(full["term"], full["estimate_s"]) if t not in ("base", "SU") and e != 0]
    check(noisy, "the exact fit leaves float noise to round (terms %s)" % list(full["estimate_s"]))
    md = ps.markdown_model(ps.linear_model(df, "exact", FACTORS), "modeled seconds")
    check(not FLOAT_NOISE.search(md), "model table without float noise:\n%s" % md)
    check("| VM | 0 | \u2014 | \u2014 | 0 |" in md and "| SU | -50.00 | \u2014 | \u2014 | -222.20 |" in md,
          "model rows rounded:\n%s" % md)
    # Headings in words with units.
    check("effect (modeled seconds)" in md and "p-value" in md and "\u0394 s" not in md,
          "model headings in words:\n%s" % md.splitlines()[-18])
    rank = ps.markdown_rank(ps.rank_table(df, "exact", FACTORS), "wall-clock seconds")
    check("mean (wall-clock seconds)" in rank and "Mean (s)" not in rank and "runs |" in rank,
          "rank headings in words:\n%s" % rank)
    check(ps.clock({"profile": {"name": "quick"}, "disk": "ide-20g-2001",
                    "cpu_model": {"name": "pentium4"}}) == "modeled", "a modeled run's clock")
    check(ps.clock({"profile": {"name": "mount-quick"}, "disk": "this machine's image file under FUSE "
                    "(wall clock)", "cpu_model": {"name": "x"}}) == "measured", "the mount's clock")
    check(ps.clock({}) is None and ps.clock(None) is None, "no paper.json: clock unknown")


def check_label_layout():
    """Figures 8-10 laid out for reading: no label overlaps another or
    leaves its axes, none left out in the paper's four-factor form, log
    axes labelled as plain factors, Figure 10's axis fitted to the data."""
    # The check itself finds overlaps: two labels in one place.
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(4, 3), dpi=ps.DPI)
    ax.text(0.5, 0.5, "SU+DP+VM")
    ax.text(0.52, 0.5, "SU+DP+DH")
    ax.text(1.5, 0.5, "outside")
    pairs, out = ps.label_overlaps(fig)
    check(pairs == [("SU+DP+VM", "SU+DP+DH")] and out == ["outside"], "overlaps found: %s, %s" % (pairs, out))
    plt.close(fig)
    # andrew-grep's shape, whose lattice had its x3.006 labels on top of
    # each other: DP alone acts, every other edge the same.
    grep = exact({"dp": 1 / 3.006}, 60.0, "grep")
    cases = [(table1(), "buildworld"), (synthetic(), "build"), (synthetic(), "mailbox"), (grep, "grep")]
    for df, test in cases:
        for make, what in ((ps.lattice_figure, "Figure 9"), (ps.improvement_figure, "Figure 8")):
            fig = make(df, test, FACTORS)
            pairs, out = ps.label_overlaps(fig)
            check(not pairs and not out, "%s %s: labels overlap %s, outside %s" % (what, test, pairs[:4], out[:4]))
            dropped = sum(fig.ufskit.values())
            check(dropped == 0, "%s %s: %d labels left out" % (what, test, dropped))
            n_text = len([t for t in fig.axes[0].texts if t.get_text().strip()])
            check(n_text >= (16 if what == "Figure 9" else 15), "%s %s: %d labels" % (what, test, n_text))
            ticks = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
            check(ticks and all(t.startswith("\u00d7") and "^" not in t for t in ticks),
                  "%s %s: y ticks as factors: %s" % (what, test, ticks))
            plt.close(fig)
    # The lattice names every combination and labels grep's eight DP edges.
    fig = ps.lattice_figure(grep, "grep", FACTORS)
    texts = [t.get_text() for t in fig.axes[0].texts]
    check(texts.count("\u00d73.01") == 8 and "SU+DP+VM+DH" in texts and "none" in texts,
          "grep lattice labels: %s" % texts)
    plt.close(fig)
    # Figure 10: the x axis ends just past the longest note, not at 2.5
    # times the largest improvement; the notes stay inside.
    df = synthetic()
    fig = ps.summary_figure(df, ["build", "mailbox"], FACTORS)
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    frame = ax.get_window_extent(r)
    ends = [t.get_window_extent(r).x1 for t in ax.texts]
    best = max(ps.summary(df, t, FACTORS)["best_improvement"] for t in ("build", "mailbox"))
    lo, hi = ax.get_xlim()
    check(ends and max(ends) <= frame.x1 and frame.x1 - max(ends) <= 30,
          "Figure 10 fitted: notes end %.0f px, axis %.0f px" % (max(ends), frame.x1))
    check(best < hi and lo > 0.5, "Figure 10 x axis %.3g..%.3g for data to %.3g" % (lo, hi, best))
    plt.close(fig)


def check_figures(tmp):
    df = synthetic()
    paths = [ps.plot_improvement(df, "build", FACTORS, os.path.join(tmp, "fig8.png")),
             ps.plot_lattice(df, "mailbox", FACTORS, os.path.join(tmp, "fig9.png")),
             ps.plot_summary(df, ["build", "mailbox"], FACTORS, os.path.join(tmp, "fig10.png"))]
    for p in paths:
        check(os.path.isfile(p) and os.path.getsize(p) > 5000 and plottest.png_ok(p),
              "%s is a non-empty PNG" % os.path.basename(p))


def run(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=600)


def check_cli(tmp):
    df = synthetic()
    csv = os.path.join(tmp, "results.csv")
    df.to_csv(csv, index=False)
    out = os.path.join(tmp, "out")  # does not exist yet: the script makes it
    r = run(csv, "--out", out)
    check(r.returncode == 0, "CLI exits 0 (rc=%d, stderr: %s)" % (r.returncode, r.stderr.strip()))
    expected = ["paper_tables.md", "paper_stats.json", "fig10_summary.png"]
    for t in MODELS:
        expected += ["rank_%s.md" % t, "model_%s.md" % t, "fig8_improvement_%s.png" % t,
                     "fig9_lattice_%s.png" % t]
    printed = r.stdout.splitlines()
    for name in expected:
        path = os.path.join(out, name)
        check(os.path.isfile(path) and os.path.getsize(path) > 0, "%s written, non-empty" % name)
        check(path in printed, "%s listed in the output" % name)
        if name.endswith(".png") and os.path.isfile(path):
            check(plottest.png_ok(path), "%s is a PNG" % name)
    try:
        with open(os.path.join(out, "paper_stats.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        check(False, "paper_stats.json readable: %s" % e)
        return
    check(doc["factors"] == FACTORS and doc["alpha"] == 0.001, "JSON factors and alpha")
    check([t["test"] for t in doc["tests"]] == list(MODELS), "JSON tests in input order")
    for t in doc["tests"]:
        name = t["test"]
        check(set(t["significant"]) == SIGNIFICANT[name], "JSON %s significant %s" % (name, t["significant"]))
        check(len(t["rank_table"]) == 16 and t["rank_table"][-1]["n"] == RUNS, "JSON %s rank table" % name)
        coeffs = {c["term"]: c for c in t["model"]["coefficients"]}
        check(coeffs["DP"]["significant"] is (name == "build"), "JSON %s DP significance flag" % name)
        check(all(os.path.isfile(os.path.join(out, v)) for v in t["files"].values()),
              "JSON %s file names resolve in DIR" % name)
    with open(os.path.join(out, "model_mailbox.md"), encoding="utf-8") as f:
        md = f.read()
    check("| DH:SU | -1.2" in md and "| DH |" not in md, "model_mailbox.md: DH:SU row, no DH row:\n%s" % md)
    with open(os.path.join(out, "rank_build.md"), encoding="utf-8") as f:
        check("| 100.00 |" in f.read(), "rank_build.md has the 100% row")

    # JSON records input, some tests only, factors named.
    js = os.path.join(tmp, "results.json")
    with open(js, "w") as f:
        json.dump(df.to_dict("records"), f)
    out2 = os.path.join(tmp, "out2")
    r = run(js, "--out", out2, "--factors", "su,dp,vm,dh", "--tests", "mailbox")
    check(r.returncode == 0, "JSON input exits 0 (stderr: %s)" % r.stderr.strip())
    check(os.path.isfile(os.path.join(out2, "model_mailbox.md"))
          and not os.path.exists(os.path.join(out2, "model_build.md")), "--tests limits the tests")

    # An extra factor: xx is ignored by default (so runs repeat), named it is analysed.
    rng = np.random.RandomState(7)
    extra = pd.DataFrame([dict(test="x y/z", su=c["su"], dp=c["dp"], xx=c["xx"], run=r,
                               seconds=20 - 8 * c["su"] - 3 * c["xx"] + rng.normal(0, 0.1))
                          for c in combos(["su", "dp", "xx"]) for r in range(3)])
    ex = os.path.join(tmp, "extra.csv")
    extra.to_csv(ex, index=False)
    r = run(ex, "--out", os.path.join(tmp, "out-x1"))
    check(r.returncode == 1 and "appears twice" in r.stderr, "left-out factor caught (%s)" % r.stderr.strip())
    out3 = os.path.join(tmp, "out3")
    r = run(ex, "--out", out3, "--factors", "su,dp,xx")
    check(r.returncode == 0, "extra factor exits 0 (stderr: %s)" % r.stderr.strip())
    try:
        with open(os.path.join(out3, "paper_stats.json")) as f:
            doc = json.load(f)
        t = doc["tests"][0]
        check(t["model"]["formula"] == "pct ~ su*dp*xx" and set(t["significant"]) == {"base", "SU", "XX"},
              "extra factor modelled: %s %s" % (t["model"]["formula"], t["significant"]))
        check(os.path.isfile(os.path.join(out3, t["files"]["fig9"])) and "/" not in t["files"]["fig9"],
              "odd test name gives a safe file name (%s)" % t["files"]["fig9"])
    except (OSError, ValueError, KeyError, IndexError) as e:
        check(False, "extra factor JSON: %s" % e)

    # ufskit's CSV with --factors su,io: all six columns, four held at 0.
    # The varying ones are the factors by default; the constant ones are not.
    rng = np.random.RandomState(11)
    six = pd.DataFrame([dict(test="ls", su=c["su"], dp=0, vm=0, dh=0, io=c["io"], gd=0, run=r,
                             seconds=30 - 10 * c["su"] - 6 * c["io"] + rng.normal(0, 0.05))
                        for c in combos(["su", "io"]) for r in range(3)])
    check(ps.default_factors(six.columns, None, six) == ["su", "io"],
          "default factors are the known columns that vary: %s" % ps.default_factors(six.columns, None, six))
    sx = os.path.join(tmp, "six.csv")
    six.to_csv(sx, index=False)
    out5 = os.path.join(tmp, "out5")
    r = run(sx, "--out", out5)
    check(r.returncode == 0, "six columns, two varying: exits 0 (stderr: %s)" % r.stderr.strip())
    try:
        with open(os.path.join(out5, "paper_stats.json")) as f:
            doc = json.load(f)
        t = doc["tests"][0]
        check(doc["factors"] == ["su", "io"] and t["model"]["formula"] == "pct ~ su*io"
              and set(t["significant"]) == {"base", "SU", "IO"},
              "io modelled: %s %s %s" % (doc["factors"], t["model"]["formula"], t["significant"]))
        coeffs = {c["term"]: c for c in t["model"]["coefficients"]}
        check(close(coeffs["IO"]["estimate_s"], -6.0, 0.2), "IO effect %.3f s, want -6" % coeffs["IO"]["estimate_s"])
    except (OSError, ValueError, KeyError, IndexError) as e:
        check(False, "six-column JSON: %s" % e)

    # Single runs through the CLI: exact effects, no crash.
    single = os.path.join(tmp, "single.csv")
    table1().to_csv(single, index=False)
    r = run(single, "--out", os.path.join(tmp, "out4"))
    check(r.returncode == 0, "single runs exit 0 (stderr: %s)" % r.stderr.strip())


def check_bad_inputs(tmp):
    good = synthetic()
    no_base = good[(good["su"] + good["dp"] + good["vm"] + good["dh"]) > 0]
    cases = {
        "missing file": (None, [], "no such file"),
        "empty file": ("", [], "empty"),
        "not JSON": ("[{\"test\": ", [], "not valid JSON"),
        "no seconds": (good.drop(columns="seconds").to_csv(index=False), [], "'seconds'"),
        "factor 2": (good.assign(dp=good["dp"] * 2).to_csv(index=False), [], "0 or 1"),
        "negative time": (good.assign(seconds=-good["seconds"]).to_csv(index=False), [], "> 0"),
        "text time": (good.assign(seconds="slow").to_csv(index=False), [], "seconds"),
        "no base run": (no_base.to_csv(index=False), [], "every factor off"),
        "unknown factor": (good.to_csv(index=False), ["--factors", "su,zz"], "'zz'"),
        "unknown test": (good.to_csv(index=False), ["--tests", "nope"], "nope"),
    }
    path = os.path.join(tmp, "bad.csv")
    bad_out = os.path.join(tmp, "out-bad")
    for label, (content, extra, needle) in cases.items():
        if os.path.exists(path):
            os.unlink(path)
        if content is not None:
            with open(path, "w") as f:
                f.write(content)
        r = run(path, "--out", bad_out, *extra)
        check(r.returncode == 1, "%s: exits 1 (rc=%d)" % (label, r.returncode))
        check(needle in r.stderr, "%s: message mentions %r (got: %s)" % (label, needle, r.stderr.strip()))
        check("Traceback" not in r.stderr, "%s: no traceback (got: %s)" % (label, r.stderr.strip()))
    r = run(path)
    check(r.returncode == 2, "no --out: usage, exit 2 (rc=%d)" % r.returncode)
    check(not os.path.exists(bad_out), "bad input writes nothing")
    return len(cases)


def main():
    check_model()
    check_rank_exact()
    check_paper_table1()
    check_formatting()
    check_label_layout()
    with tempfile.TemporaryDirectory(prefix="paper-stats-test.") as tmp:
        check_best_not_all_on(tmp)
        check_missing_combination(tmp)
        check_figures(tmp)
        check_cli(tmp)
        bad = check_bad_inputs(tmp)
    if plottest.failures:
        print("%d check(s) failed" % len(plottest.failures))
        return 1
    print("ok: models, rank tables, figures, CLI; %d bad inputs rejected" % bad)
    return 0


if __name__ == "__main__":
    sys.exit(main())
