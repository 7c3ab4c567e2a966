#!/usr/bin/env python3
"""Statistics of a 2^k factorial benchmark in the form of section 4 of the
FFS-optimisations paper (seed 004): for each test, the rank table (Table 1),
the linear model with every interaction (Tables 2 and 3), the improvement
triangles (Figure 8) and the improvement lattice (Figure 9); over all tests,
the summary of gains (Figure 10).

usage: python3 analysis/paper_stats.py RESULTS.csv|RESULTS.json --out DIR
           [--factors su,dp,vm,dh[,...]] [--alpha 0.001] [--tests a,b,...]
           [--clock modeled|measured]

Input: one row per run, as CSV or as a JSON list of objects (or an object
whose "runs" is that list), with columns `test` (string), one 0/1 column per
factor (default: whichever of su, dp, vm, dh, io, gd exist and vary: soft
updates, dirpref, vmiodir, dirhash, inode order, growing dirhash;
`--factors` names them exactly, in order, and may add others), optionally `run` (repeat index) and `seconds` (the measured time,
finite and > 0).

Invariants (checked on input, relied on everywhere):
- every factor value is 0 or 1; every time is finite and positive;
- every test has at least one run with every factor off (the paper's 100%);
- with a `run` column, no (test, combination, run) appears twice (a twice-
  seen run usually means a factor column was left out of --factors).
A combination with no runs is left out of the rank table and the figures;
the linear model then is not fitted (it would not be identifiable) and says
so in its note.

Writes DIR/rank_<test>.md and DIR/model_<test>.md per test, all of them in
DIR/paper_tables.md, DIR/fig8_improvement_<test>.png,
DIR/fig9_lattice_<test>.png, DIR/fig10_summary.png and DIR/paper_stats.json
(everything computed, NaN as null, figure and table paths relative to DIR);
prints the paths written. Exit 2 on usage, 1 on bad input.

The tables' numbers have a fixed number of significant digits and no
exponent; a value under 1e-9 of its table's scale (the float noise an exact
fit leaves of a zero effect) is shown as 0. Their headings say in words what
a column is and its unit: "modeled seconds" when the runs are of the modeled
2002 machine, "wall-clock seconds" when measured (--clock, by default read
from the paper.json beside RESULTS: see clock()). The figures' axes span the
data; no label overlaps another (one with no room is left out, and the
figure says how many were).
"""
import argparse
import io
import json
import keyword
import math
import multiprocessing
import os
import re
import sys
import warnings

import plotenv

matplotlib, pd = plotenv.load(__file__)
import numpy as np  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Polygon, Rectangle  # noqa: E402
try:
    import statsmodels.formula.api as smf  # noqa: E402
except ImportError as e:  # a Python with matplotlib and pandas but not statsmodels
    _here = os.path.realpath(sys.executable or "")
    if (os.path.exists(plotenv.SYSTEM_PYTHON) and _here != os.path.realpath(plotenv.SYSTEM_PYTHON)
            and not os.environ.get("UFSKIT_PLOT_REEXEC")):
        os.environ["UFSKIT_PLOT_REEXEC"] = "1"
        os.execv(plotenv.SYSTEM_PYTHON, [plotenv.SYSTEM_PYTHON, os.path.abspath(sys.argv[0])] + sys.argv[1:])
    sys.exit("paper_stats.py: %s; install it with `apt-get install -y python3-statsmodels`" % e)

BadInput = plotenv.BadInput

# The paper's four, then this project's two (`ufskit bench paper --factors`):
# io, inodes of large directories in name order (seed 001); gd, a dirhash
# budget that grows and gives memory back (seed 002).
KNOWN_FACTORS = ["su", "dp", "vm", "dh", "io", "gd"]
NAMES = {"su": "soft updates", "dp": "dirpref", "vm": "vmiodir", "dh": "dirhash",
         "io": "inode order", "gd": "growing dirhash"}
# Seed 004, section 4.3: "Only coefficients that have a statistical
# significance of more than 1/1000 are shown."
PAPER_ALPHA = 0.001
BULLET = "\u2022"
LABEL_MIN_GAIN = 0.005  # Figure 9 labels edges whose gain differs from 1 by this
COLOURS = ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink",
           "tab:olive", "tab:cyan", "tab:red", "tab:grey"]


# ---------------------------------------------------------------- input

def label(f):
    """A factor's column heading, as in the paper: su -> SU."""
    return f.upper()


def name(f):
    """A factor's long name (soft updates, ...); its label for others."""
    return NAMES.get(f, label(f))


def colour(f, factors):
    return COLOURS[factors.index(f) % len(COLOURS)]


def default_factors(columns, listed=None, df=None):
    """The factor columns: `listed` (exactly, in its order) when given, else
    whichever of su, dp, vm, dh, io, gd are among `columns` and, when the
    runs `df` are given, take more than one value in them (a column held
    at one level, as ufskit writes for the factors a run did not vary, is
    configuration, not a factor)."""
    if listed:
        return list(listed)
    out = []
    for f in KNOWN_FACTORS:
        if f not in columns:
            continue
        if df is not None:
            # Levels as prepare() reads them (0, "0", 0.0 and False are one
            # level). An empty column is no factor; a value that is no level
            # makes the column one, so that prepare() rejects it by row.
            vals = [v for v in df[f] if not (isinstance(v, float) and math.isnan(v))]
            levels = {_zero_one(v) for v in vals}
            if not vals or (None not in levels and len(levels) < 2):
                continue
        out.append(f)
    return out


def read_results(path):
    """The runs of `path` (CSV, or JSON when the file starts with [ or {) as
    a DataFrame, unchecked; BadInput if unreadable."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise BadInput("no such file")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(str(e))
    if text.lstrip()[:1] in ("[", "{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise BadInput("not valid JSON: %s" % e)
        if isinstance(doc, dict):
            doc = doc.get("runs")
        if not isinstance(doc, list) or not all(isinstance(r, dict) for r in doc):
            raise BadInput("expected a JSON list of run objects (or an object whose \"runs\" is one)")
        return pd.DataFrame(doc)
    if not text.strip():
        raise BadInput("empty file")
    try:
        return pd.read_csv(io.StringIO(text), dtype={"test": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise BadInput("not valid CSV: %s" % e)


def _zero_one(v):
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, np.integer)) and v in (0, 1):
        return int(v)
    if isinstance(v, (float, np.floating)) and v in (0.0, 1.0):
        return int(v)
    if isinstance(v, str) and v.strip() in ("0", "1"):
        return int(v.strip())
    return None


def prepare(df, factors=None):
    """Checks the runs against the module's invariants and returns
    (runs, factors): a copy with `test` as str, each factor as int 0/1 and
    `seconds` as float. BadInput names the first offending row."""
    if not isinstance(df, pd.DataFrame) or df.empty:
        raise BadInput("no runs")
    factors = default_factors(df.columns, factors, df)
    if df.attrs.get("paper_stats_factors") == factors:
        return df, factors  # already checked (by this function)
    if not factors:
        raise BadInput("no factor columns: expected some of %s, or name them with --factors"
                       % ", ".join(KNOWN_FACTORS))
    if len(set(factors)) != len(factors):
        raise BadInput("a factor is named twice: %s" % ",".join(factors))
    for f in factors:
        if (not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", f) or keyword.iskeyword(f)
                or f in ("test", "run", "seconds", "pct")):
            raise BadInput("factor %r: must be an identifier other than test/run/seconds/pct" % f)
    for col in ["test", "seconds"] + factors:
        if col not in df.columns:
            raise BadInput("missing column %r" % col)
    out = df.copy()
    for i, v in enumerate(out["test"]):
        if not isinstance(v, str) or not v:
            raise BadInput("row %d: \"test\" must be a non-empty string (got %r)" % (i, v))
    for f in factors:
        vals = [_zero_one(v) for v in out[f]]
        for i, v in enumerate(vals):
            if v is None:
                raise BadInput("row %d: factor %r must be 0 or 1 (got %r)" % (i, f, out[f].iloc[i]))
        out[f] = vals
    secs = []
    for i, v in enumerate(out["seconds"]):
        if isinstance(v, str):
            try:
                v = float(v)
            except ValueError:
                v = None
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not math.isfinite(v) or v <= 0:
            raise BadInput("row %d: \"seconds\" must be a finite number > 0 (got %r)"
                           % (i, out["seconds"].iloc[i]))
        secs.append(float(v))
    out["seconds"] = secs
    if "run" in out.columns:
        dup = out.duplicated(["test"] + factors + ["run"], keep=False)
        if dup.any():
            r = out[dup].iloc[0]
            raise BadInput("test %r: run %r of %s appears twice (is a factor column missing from "
                           "--factors?)" % (r["test"], r["run"], combo_label(tuple(r[f] for f in factors),
                                                                              factors)))
    for t, sub in out.groupby("test", sort=False):
        if not (sub[factors] == 0).all(axis=1).any():
            raise BadInput("test %r: no run with every factor off (the 100%% of Time%%)" % t)
    out = out.reset_index(drop=True)
    out.attrs["paper_stats_factors"] = list(factors)
    return out, factors


def tests_of(df):
    """The test names in order of first appearance."""
    return list(dict.fromkeys(df["test"]))


def combo_label(combo, factors):
    """SU+DP for (1, 1, 0, 0); "none" when nothing is enabled."""
    on = [label(f) for f, v in zip(factors, combo) if v]
    return "+".join(on) if on else "none"


def all_combos(factors):
    """Every 0/1 tuple over `factors`, the none combination first, in
    binary counting order with the first factor as the highest bit."""
    k = len(factors)
    return [tuple((i >> (k - 1 - j)) & 1 for j in range(k)) for i in range(2 ** k)]


def _runs(df, test, factors):
    sub = df[df["test"] == test]
    if sub.empty:
        raise BadInput("no runs of test %r" % test)
    return sub


def _column(c, name):
    """One column of cells() as a dict by combination tuple (a lookup in
    it costs far less than a .loc on the tuple index)."""
    return dict(zip(c.index, c[name]))


def cells(df, test, factors):
    """Per combination present: mean, sd (ddof 1), n, se = sd/sqrt(n) of
    seconds, and improvement = mean(none) / mean (the factor by which the
    combination is faster than no optimisation). Indexed by combination
    tuple, in all_combos order."""
    sub = _runs(df, test, factors)
    g = sub.groupby(factors)["seconds"]
    c = pd.DataFrame({"mean": g.mean(), "sd": g.std(ddof=1), "n": g.count()})
    c.index = [tuple(int(x) for x in (i if isinstance(i, tuple) else (i,))) for i in c.index]
    c = c.reindex([k for k in all_combos(factors) if k in c.index])
    c["se"] = c["sd"] / np.sqrt(c["n"])
    base = c.loc[[tuple([0] * len(factors))], "mean"].iloc[0]
    c["improvement"] = base / c["mean"]
    c.attrs["base_mean"] = float(base)
    return c


# ------------------------------------------------------------ Table 1

def rank_table(df, test, factors):
    """Table 1 of the paper (rank table): one row per combination present,
    ranked by mean time, fastest first (ties keep combination order). One
    column per factor, headed by its label (SU, DP, ...), holding "•" when
    the optimisation is enabled and "" otherwise; then
      mean_s    mean of the runs' seconds,
      time_pct  mean as a percentage of the mean of the combination with no
                optimisation enabled ("The table also shows the time as a
                percentage, where no optimisations is taken to be 100%"),
      se_pct    standard error of the mean, sigma/sqrt(n), in the same
                percentage points: the paper's column sigma/sqrt(n) is in
                those units (its size matches Table 2's sigmas, not seconds),
      se_s      the same standard error in seconds,
      sd_s      the standard deviation of the runs (ddof 1; NaN for n = 1),
      n         number of runs.
    The index is the rank, from 1; `combination` names the row (SU+DP)."""
    df, factors = prepare(df, factors)
    c = cells(df, test, factors)
    base = c.attrs["base_mean"]
    order = sorted(range(len(c)), key=lambda i: (c["mean"].iloc[i], i))
    rows = []
    for i in order:
        combo = c.index[i]
        r = c.iloc[i]
        row = {label(f): (BULLET if v else "") for f, v in zip(factors, combo)}
        row.update(combination=combo_label(combo, factors), mean_s=float(r["mean"]),
                   time_pct=100.0 * r["mean"] / base, se_pct=100.0 * r["se"] / base,
                   se_s=float(r["se"]), sd_s=float(r["sd"]), n=int(r["n"]))
        rows.append(row)
    t = pd.DataFrame(rows, index=pd.RangeIndex(1, len(rows) + 1, name="rank"))
    t.attrs.update(test=test, factors=list(factors), base_mean_s=base)
    return t


# -------------------------------------------------------- Tables 2, 3

def term_label(term):
    """Patsy's su:dp -> the paper's DP:SU (labels sorted, as in Tables 2
    and 3); Intercept -> base."""
    if term == "Intercept":
        return "base"
    return ":".join(sorted(label(f) for f in term.split(":")))


def fit_model(df, test, factors):
    """The paper's linear model with all interactions, fitted by OLS
    (statsmodels) to one test:
        pct ~ su*dp*vm*dh          (the factors given, whatever they are)
    where pct = 100 * seconds / mean seconds of the no-optimisation runs:
    the paper models "Δ %Time" (Tables 2 and 3 give base = 100.00), so the
    coefficients are percentage points of the unoptimised time. They are the
    seconds-model's coefficients times 100/base, with the same p-values;
    the seconds are given too (estimate_s, se_s).

    Returns every coefficient, one row per term, ordered base, main effects,
    pairs, ... (factor order within a degree): term (paper label), estimate,
    se, p, estimate_s, se_s, t. attrs: test, formula, nobs, df_resid,
    base_mean_s, rsquared, note (why se/p are missing, if they are).
    With one run per combination the model is saturated (no residual
    degrees of freedom): the estimates are the exact effects of the cell
    means and se, p are NaN. With a combination missing the model is not
    identifiable: no rows, and the note says which are missing."""
    df, factors = prepare(df, factors)
    sub = _runs(df, test, factors).copy()
    c = cells(df, test, factors)
    base = c.attrs["base_mean"]
    sub["pct"] = 100.0 * sub["seconds"] / base
    formula = "pct ~ " + "*".join(factors)
    cols = ["term", "estimate", "se", "p", "estimate_s", "se_s", "t"]
    attrs = dict(test=test, factors=list(factors), formula=formula, nobs=int(len(sub)),
                 base_mean_s=base, df_resid=None, rsquared=None, note="")
    missing = [k for k in all_combos(factors) if k not in c.index]
    if missing:
        out = pd.DataFrame(columns=cols)
        attrs["note"] = ("not fitted: no runs of %s, so the model with all interactions is not "
                         "identifiable" % ", ".join(combo_label(k, factors) for k in missing))
        out.attrs.update(attrs)
        return out
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        fit = smf.ols(formula, data=sub).fit()
        bse, pv, tv = fit.bse, fit.pvalues, fit.tvalues
    attrs["df_resid"] = float(fit.df_resid)
    attrs["rsquared"] = float(fit.rsquared) if np.isfinite(fit.rsquared) else None
    exact = fit.df_resid < 0.5
    if exact:
        attrs["note"] = ("one run per combination: no residual degrees of freedom, so these are the "
                         "exact effects of the cell means, with no standard error or significance")
    rows = []
    for term in fit.params.index:
        parts = [] if term == "Intercept" else term.split(":")
        key = (len(parts), sorted(factors.index(f) for f in parts))
        est = float(fit.params[term])
        se = float("nan") if exact else float(bse[term])
        p = float("nan") if exact else float(pv[term])
        tval = float("nan") if exact else float(tv[term])
        rows.append((key, dict(term=term_label(term), estimate=est, se=se, p=p,
                               estimate_s=est * base / 100.0, se_s=se * base / 100.0, t=tval)))
    rows.sort(key=lambda kr: kr[0])
    out = pd.DataFrame([r for _, r in rows], columns=cols)
    if not exact and fit.scale <= 0:
        attrs["note"] = "the runs of each combination are identical: zero residual variance"
    out.attrs.update(attrs)
    return out


def linear_model(df, test, factors, alpha=PAPER_ALPHA):
    """Tables 2 and 3 of the paper: the coefficients of fit_model (Δ %Time,
    percentage points of the no-optimisation time) whose p-value is below
    `alpha`, with their estimate, standard error (the paper's sigma) and
    p-value; the base row (intercept, 100 by construction) always comes
    first, as in both tables. The default alpha is the paper's 1/1000.
    When significance cannot be judged (one run per combination) every
    coefficient is returned, se and p NaN, and attrs["note"] says so; when
    the model is not fitted the table is empty with the reason in the note.
    attrs also carry alpha and those of fit_model."""
    full = fit_model(df, test, factors)
    if full.empty:
        out = full
    elif full["p"].isna().all():
        out = full.copy()
    else:
        keep = (full["term"] == "base") | (full["p"] < alpha)
        out = full[keep].copy()
    out = out.reset_index(drop=True)
    out.attrs.update(full.attrs)
    out.attrs["alpha"] = alpha
    return out


# ---------------------------------------------------- lattice helpers

def effects(df, test, factors):
    """Each factor's size of effect: the geometric mean, over the lattice
    edges that enable it (from every combination present without it to the
    one with it), of the speed-up time(without) / time(with). > 1 helps."""
    df, factors = prepare(df, factors)
    c = cells(df, test, factors)
    mean = _column(c, "mean")
    out = {}
    for j, f in enumerate(factors):
        logs = []
        for k in c.index:
            if k[j] == 0:
                to = k[:j] + (1,) + k[j + 1:]
                if to in mean:
                    logs.append(math.log(mean[k] / mean[to]))
        out[f] = math.exp(sum(logs) / len(logs)) if logs else float("nan")
    return out


def effect_order(df, test, factors):
    """The factors sorted by size of effect (effects()), largest first; a
    factor with no edge goes last; ties keep factor order."""
    e = effects(df, test, factors)
    return sorted(factors, key=lambda f: (-(e[f]) if math.isfinite(e[f]) else math.inf,
                                          factors.index(f)))


def uppermost_path(df, test, factors):
    """The uppermost path across the improvement lattice (Figure 10): from
    no optimisation, repeatedly enable the one optimisation that gives the
    fastest combination present, until all are enabled (or none of the next
    combinations has runs). A list of steps {combination, added (factor or
    None for the start), improvement (over no optimisation), gain (over the
    previous step)}."""
    df, factors = prepare(df, factors)
    c = cells(df, test, factors)
    mean, improvement = _column(c, "mean"), _column(c, "improvement")
    cur = tuple([0] * len(factors))
    path = [dict(combination=combo_label(cur, factors), added=None, improvement=1.0, gain=1.0)]
    while sum(cur) < len(factors):
        nxt = [(mean[cur[:j] + (1,) + cur[j + 1:]], j) for j in range(len(factors))
               if cur[j] == 0 and cur[:j] + (1,) + cur[j + 1:] in mean]
        if not nxt:
            break
        _, j = min(nxt)
        prev = path[-1]["improvement"]
        cur = cur[:j] + (1,) + cur[j + 1:]
        imp = float(improvement[cur])
        path.append(dict(combination=combo_label(cur, factors), added=factors[j], improvement=imp,
                         gain=imp / prev))
    return path


def summary(df, test, factors):
    """Figure 10's numbers for one test: the uppermost path, the improvement
    with every optimisation on (None if that combination has no runs) and
    the best combination with its improvement."""
    df, factors = prepare(df, factors)
    c = cells(df, test, factors)
    best = c["improvement"].idxmax()
    full = tuple([1] * len(factors))
    return dict(path=uppermost_path(df, test, factors),
                all_on=float(c.loc[[full], "improvement"].iloc[0]) if full in c.index else None,
                best=combo_label(best, factors), best_improvement=float(c.loc[[best], "improvement"].iloc[0]))


# ----------------------------------------------------- figure helpers

DPI = 110  # figures are laid out and saved at this resolution


def times(x):
    """An improvement factor as the figures print it: x2.04, x0.985, x211,
    x1234 (three significant digits, never an exponent)."""
    if not math.isfinite(x):
        return "\u2014"
    return "\u00d7" + ("%d" % round(x) if abs(x) >= 100 else "%.3g" % x)


def _log_ticks(lo, hi):
    """Tick values of a log axis over [lo, hi] that read as plain numbers:
    1, 2, 5, 10, ... (fewer per decade over a wide range, evenly spaced
    ones over less than half a decade)."""
    decades = math.log10(hi / lo)
    if decades < 0.5:
        ticks = list(matplotlib.ticker.MaxNLocator(nbins=5, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi))
    else:
        mant = ((1,) if decades > 5 else (1, 3) if decades > 2.5 else (1, 2, 5) if decades > 1.2
                else (1, 1.5, 2, 3, 5, 7))
        ticks = [m * 10.0 ** e for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
                 for m in mant]
    return [t for t in ticks if lo <= t <= hi and t > 0]


def _log_axis(axis, lo, hi):
    """Ticks of an improvement axis already in log scale: x1, x2, x5, ...
    instead of 2x10^0, minor ticks unlabelled."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    axis.set_major_locator(FixedLocator(_log_ticks(lo, hi)))
    axis.set_major_formatter(FuncFormatter(lambda x, _pos=None: times(x)))
    axis.set_minor_formatter(NullFormatter())


def _overlap(a, b, pad=1.0):
    """Whether display boxes a and b come within `pad` pixels of each other."""
    return a.x0 < b.x1 + pad and b.x0 < a.x1 + pad and a.y0 < b.y1 + pad and b.y0 < a.y1 + pad


class Labels:
    """Places text labels on an axes whose layout is final so that none
    overlaps another, an obstacle (a node, say) or the axes' edge: a label
    takes the first of its candidate positions that is clear; a label with
    no clear position is left out and counted in `dropped`."""

    def __init__(self, fig, ax):
        self.ax = ax
        self.renderer = fig.canvas.get_renderer()
        self.frame = ax.get_window_extent(self.renderer)
        self.boxes, self.texts, self.dropped = [], [], 0

    def block(self, x0, y0, x1, y1):
        """An obstacle: the data rectangle (x0, y0)-(x1, y1), in display
        coordinates a box of at least 6 pixels."""
        from matplotlib.transforms import Bbox
        (a, b), (c, d) = self.ax.transData.transform([(x0, y0), (x1, y1)])
        cx, cy = (a + c) / 2, (b + d) / 2
        w, h = max(abs(c - a), 6.0), max(abs(d - b), 6.0)
        self.boxes.append(Bbox([[cx - w / 2, cy - h / 2], [cx + w / 2, cy + h / 2]]))

    def _inside(self, b):
        f = self.frame
        return f.x0 + 1 <= b.x0 and b.x1 <= f.x1 - 1 and f.y0 + 1 <= b.y0 and b.y1 <= f.y1 - 1

    def place(self, text, candidates, **kw):
        """`candidates`: (x, y, dx, dy, ha, va): the data point, an offset in
        points and the alignment. Returns the Text placed, or None."""
        for x, y, dx, dy, ha, va in candidates:
            t = self.ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va,
                                 annotation_clip=False, **kw)
            b = t.get_window_extent(self.renderer)
            if self._inside(b) and not any(_overlap(b, o) for o in self.boxes):
                self.boxes.append(b)
                self.texts.append(t)
                return t
            t.remove()
        self.dropped += 1
        return None


def label_overlaps(fig):
    """The pairs of texts of `fig`'s axes (labels, tick labels, titles,
    legends' texts aside) whose boxes overlap, as (text, text) strings; and
    the texts that stick out of their axes. For the tests: a figure whose
    labels are readable returns ([], [])."""
    r = fig.canvas.get_renderer()
    pairs, out = [], []
    for ax in fig.axes:
        frame = ax.get_window_extent(r)
        texts = [t for t in ax.texts if t.get_visible() and t.get_text().strip()]
        boxes = [t.get_window_extent(r) for t in texts]
        for i in range(len(texts)):
            b = boxes[i]
            if b.x0 < frame.x0 - 0.5 or b.x1 > frame.x1 + 0.5 or b.y0 < frame.y0 - 0.5 or b.y1 > frame.y1 + 0.5:
                out.append(texts[i].get_text())
            for j in range(i + 1, len(texts)):
                if _overlap(boxes[i], boxes[j], pad=0.0):
                    pairs.append((texts[i].get_text(), texts[j].get_text()))
    return pairs, out


def _finish(fig, path):
    """Writes and closes a figure laid out already; returns `path`."""
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _fit_log_room(ax, lo, hi, below_px, above_px):
    """y limits of a log axis, laid out already, that leave `below_px` and
    `above_px` pixels beneath `lo` and above `hi` (for labels)."""
    h = ax.get_window_extent(ax.figure.canvas.get_renderer()).height
    a, b = math.log10(lo), math.log10(hi)
    span = max(b - a, 0.02) * h / max(h - below_px - above_px, h * 0.2)
    return 10 ** (a - below_px * span / h), 10 ** (b + above_px * span / h)


# ------------------------------------------------------------ Figure 8

def improvement_figure(df, test, factors):
    """Figure 8 (improvement by optimisation) as an open matplotlib figure;
    plot_improvement writes it. `fig.ufskit` holds the labels left out."""
    df, factors = prepare(df, factors)
    c = cells(df, test, factors)
    order = effect_order(df, test, factors)
    idx = [factors.index(f) for f in order]
    improvement = _column(c, "improvement")
    fig, ax = plt.subplots(figsize=(max(8.0, min(11.0, 2.75 * len(order))), 5.5), dpi=DPI)
    tri = []  # (x, half width, y0, y1, start label, rotated)
    for k, f in enumerate(order):
        m = 2 ** k
        width = 0.8 / m
        for s in range(m):
            frm = [0] * len(factors)
            for b in range(k):
                frm[idx[b]] = (s >> (k - 1 - b)) & 1
            to = list(frm)
            to[idx[k]] = 1
            frm, to = tuple(frm), tuple(to)
            if frm not in c.index or to not in c.index:
                continue
            y0, y1 = improvement[frm], improvement[to]
            x = k + 1 - 0.4 + (s + 0.5) * width
            half = width * 0.42
            up = y1 >= y0
            ax.add_patch(Polygon([(x - half, y0), (x + half, y0), (x, y1)], closed=True,
                                 facecolor="tab:green" if up else "tab:red", alpha=0.6,
                                 edgecolor="black", linewidth=0.6))
            tri.append((x, half, y0, y1, combo_label(frm, factors), m > 2))
    ys = list(c["improvement"])
    lo, hi = min(ys + [1.0]), max(ys + [1.0])
    ax.set_yscale("log")
    ax.set_ylim(lo / 1.2, hi * 1.2)
    ax.set_xlim(0.5, len(order) + 0.5)
    ax.axhline(1.0, color="grey", linewidth=0.6, linestyle=":")
    ax.set_xticks(range(1, len(order) + 1))
    ax.set_xticklabels(["%s\n(%s)" % (label(f), name(f)) for f in order], fontsize=9)
    ax.set_ylabel("improvement over no optimisation (log scale)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_title("Improvement by optimisation: %s (cf. paper Figure 8)" % test, fontsize=10)
    fig.tight_layout()
    # Room for the labels: the combination a triangle starts from beneath
    # it, its gain above it (both turned upright where the column is narrow).
    rot = any(r for *_, r in tri)
    ylo, yhi = _fit_log_room(ax, lo, hi, 80 if rot else 30, 50 if rot else 25)
    ax.set_ylim(ylo, yhi)
    _log_axis(ax.yaxis, ylo, yhi)
    lab = Labels(fig, ax)
    for x, half, y0, y1, _, _ in tri:
        lab.block(x - half, min(y0, y1), x + half, max(y0, y1))
    for x, half, y0, y1, start, rotated in tri:
        kw = dict(fontsize=7, rotation=90 if rotated else 0)
        low, high = min(y0, y1), max(y0, y1)
        lab.place(start, [(x, low, 0, -3 - d, "center", "top") for d in (0, 10, 20, 30)], **kw)
        lab.place(times(y1 / y0), [(x, high, 0, 3 + d, "center", "bottom") for d in (0, 10, 20, 30)], **kw)
    if lab.dropped:
        ax.set_xlabel("(%d label(s) left out for lack of room; the rank table has every mean)" % lab.dropped,
                      fontsize=8)
    fig.ufskit = dict(dropped=lab.dropped)
    return fig


def plot_improvement(df, test, factors, path):
    """Figure 8 (improvement by optimisation): the optimisations, sorted
    left to right by size of effect (effect_order), one column each; column
    k holds 2^(k-1) triangles, one per setting of the k-1 optimisations to
    its left (the ones to its right off), each going from that combination
    to the same with optimisation k enabled. y is the improvement factor
    over no optimisation (mean time of none / mean time), log scale, so a
    triangle pointing up (green) is an improvement and one pointing down
    (red) a detriment; the label under each names the combination it starts
    from and the number above it its gain (time before / time after), both
    upright where a column holds more than two triangles, placed so that
    none overlaps another. Missing combinations leave gaps."""
    return _finish(improvement_figure(df, test, factors), path)


# ------------------------------------------------------------ Figure 9

def lattice_figure(df, test, factors):
    """Figure 9 (improvement lattice) as an open matplotlib figure, laid out;
    plot_lattice writes it. `fig.ufskit` counts the labels left out for
    lack of room (node_dropped, edge_dropped)."""
    df, factors = prepare(df, factors)
    c = cells(df, test, factors)
    k = len(factors)
    pos = {}
    for level in range(k + 1):
        col = [i for i in c.index if sum(i) == level]
        span = min(0.8, 0.2 * (len(col) - 1))
        for j, node in enumerate(col):
            pos[node] = level + (j * span / (len(col) - 1) - span / 2 if len(col) > 1 else 0.0)
    # 11 inches at DPI: the report shows it at its own size, labels at 8 points.
    fig, ax = plt.subplots(figsize=(11.0, 7.5) if k <= 4 else (3.0 * (k + 1), 10.0), dpi=DPI)
    base = c.attrs["base_mean"]
    improvement = _column(c, "improvement")
    ys, edges, nodes = [], [], []
    for node in c.index:
        for j, f in enumerate(factors):
            if node[j]:
                continue
            to = node[:j] + (1,) + node[j + 1:]
            if to not in c.index:
                continue
            y0, y1 = improvement[node], improvement[to]
            ax.plot([pos[node], pos[to]], [y0, y1], color=colour(f, factors), linewidth=1.0,
                    linestyle="-" if y1 >= y0 else "--", alpha=0.8)
            if abs(math.log(y1 / y0)) >= math.log(1 + LABEL_MIN_GAIN):
                edges.append((pos[node], y0, pos[to], y1, f))
    for node in c.index:
        r = c.loc[[node]].iloc[0]
        y = r["improvement"]
        sd = r["sd"] if math.isfinite(r["sd"]) else 0.0
        top = base / max(r["mean"] - sd, r["mean"] * 1e-3)
        bottom = base / (r["mean"] + sd)
        ys += [top, bottom]
        ax.add_patch(Rectangle((pos[node] - 0.012, bottom), 0.024, top - bottom, facecolor="black",
                               edgecolor="black", zorder=3))
        ax.plot([pos[node]], [y], marker="o", color="black", markersize=3, zorder=4)
        nodes.append((pos[node], y, bottom, top, combo_label(node, factors)))
    lo, hi = min(ys + [1.0]), max(ys + [1.0])
    ax.set_yscale("log")
    ax.set_ylim(lo / 1.15, hi * 1.15)
    ax.set_xlim(-0.55, k + 0.55)
    ax.set_xticks(range(k + 1))
    ax.set_xlabel("optimisations enabled")
    ax.set_ylabel("improvement over no optimisation (log scale; bar: mean \u00b1 sd)")
    handles = [matplotlib.lines.Line2D([], [], color=colour(f, factors),
                                       label="+%s (%s)" % (label(f), name(f))) for f in factors]
    handles.append(matplotlib.lines.Line2D([], [], color="black", linestyle="--", label="worse"))
    ax.legend(handles=handles, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.08),
              ncol=len(handles), frameon=False)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.set_title("Improvement lattice: %s (cf. paper Figure 9)" % test, fontsize=10)
    fig.tight_layout()
    ylo, yhi = _fit_log_room(ax, lo, hi, 30, 30)
    ax.set_ylim(ylo, yhi)
    _log_axis(ax.yaxis, ylo, yhi)
    lab = Labels(fig, ax)
    for x, y, bottom, top, _ in nodes:
        lab.block(x - 0.012, bottom, x + 0.012, top)
    # Node names first, beside, above or below their node; then the edges'
    # gains, the largest first, at the first clear point along the edge.
    spots = [(5, 0, "left", "center"), (0, 5, "center", "bottom"), (0, -5, "center", "top"),
             (-5, 0, "right", "center"), (0, 15, "center", "bottom"), (0, -15, "center", "top"),
             (6, 9, "left", "bottom"), (-6, 9, "right", "bottom"), (6, -9, "left", "top"),
             (-6, -9, "right", "top"), (0, 25, "center", "bottom"), (0, -25, "center", "top")]
    for x, y, _, _, text in nodes:
        lab.place(text, [(x, y, dx, dy, ha, va) for dx, dy, ha, va in spots], fontsize=8, zorder=5,
                  bbox=dict(boxstyle="square,pad=0.05", facecolor="white", edgecolor="none", alpha=0.7))
    node_dropped = lab.dropped
    edges.sort(key=lambda e: -abs(math.log(e[3] / e[1])))
    for x0, y0, x1, y1, f in edges:
        pts = [(x0 + t * (x1 - x0), y0 * (y1 / y0) ** t) for t in (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8)]
        # On the edge, else just above or below it.
        cands = [(x, y, 0, dy, "center", "center") for dy in (0, 8, -8) for x, y in pts]
        lab.place(times(y1 / y0), cands, fontsize=7,
                  color=colour(f, factors), zorder=5,
                  bbox=dict(boxstyle="square,pad=0.1", facecolor="white", edgecolor="none", alpha=0.85))
    edge_dropped = lab.dropped - node_dropped
    if lab.dropped:
        ax.set_xlabel("optimisations enabled    (%s left out for lack of room; the rank table has every "
                      "mean)" % " and ".join(x for x in ("%d combination name(s)" % node_dropped if node_dropped
                                                         else "", "%d gain(s)" % edge_dropped if edge_dropped
                                                         else "") if x))
    fig.ufskit = dict(node_dropped=node_dropped, edge_dropped=edge_dropped)
    return fig


def plot_lattice(df, test, factors, path):
    """Figure 9 (improvement lattice): a node per combination present, x the
    number of optimisations enabled (the nodes of one column spread
    sideways, in combination order, over at most 0.8 of a column), y the
    improvement over no optimisation (log scale); the node is a bar whose
    height spans the mean +/- one standard deviation of the runs (the
    paper: "The height of nodes shows the variance of the measurement"),
    with its name beside, above or below it. An edge joins each combination
    to each with one more optimisation, coloured by the optimisation it
    enables, solid when it improves and dashed when it makes things worse,
    labelled with its gain (time before / time after, three significant
    digits) unless that is within LABEL_MIN_GAIN (0.5%) of 1, which would
    only add clutter. No label overlaps another or a node: each takes the
    first clear spot of its candidates (names first, then gains, largest
    first, along their edge); one with none is left out and the x axis's
    label says how many were."""
    return _finish(lattice_figure(df, test, factors), path)


# ----------------------------------------------------------- Figure 10

def summary_figure(df, tests, factors):
    """Figure 10 as an open matplotlib figure; plot_summary writes it."""
    df, factors = prepare(df, factors)
    height = 1.6 + 0.4 * len(tests)
    fig, ax = plt.subplots(figsize=(10.0, height), dpi=DPI)
    xs, notes = [], []
    for row, test in enumerate(tests):
        y = len(tests) - 1 - row
        s = summary(df, test, factors)
        for a, b in zip(s["path"], s["path"][1:]):
            x0, x1 = a["improvement"], b["improvement"]
            xs += [x0, x1]
            f = b["added"]
            if x1 >= x0:
                ax.barh(y, x1 - x0, left=x0, height=0.6, color=colour(f, factors), edgecolor="black",
                        linewidth=0.4)
            else:
                ax.barh(y, x0 - x1, left=x1, height=0.6, color="white", edgecolor=colour(f, factors),
                        hatch="////", linewidth=0.8, zorder=3)
        end = s["path"][-1]["improvement"]
        text = times(end)
        if s["best_improvement"] > end * (1 + 1e-9):
            ax.barh(y, s["best_improvement"] - end, left=end, height=0.6, fill=False,
                    edgecolor="black", linestyle="--", linewidth=0.8)
            text += "  (best %s: %s)" % (times(s["best_improvement"]), s["best"])
        xs += [s["best_improvement"]]
        notes.append((max(end, s["best_improvement"]), y, text))
    v = [x for x in xs if x > 0 and math.isfinite(x)] + [1.0]
    lo, hi = min(v) / 1.1, max(v) * 1.1
    ax.set_xscale("log")
    ax.set_xlim(lo, hi)
    ax.axvline(1.0, color="grey", linewidth=0.6)
    ax.set_ylim(-0.7, len(tests) - 0.3)
    ax.set_yticks(range(len(tests)))
    ax.set_yticklabels(list(reversed(tests)), fontsize=8)
    ax.set_xlabel("improvement factor over no optimisation (log scale)")
    ax.set_title("Summary of results by benchmark: uppermost path across the lattice "
                 "(cf. paper Figure 10)", fontsize=10)
    handles = [Rectangle((0, 0), 1, 1, color=colour(f, factors), label="%s (%s)" % (label(f), name(f)))
               for f in factors]
    handles.append(Rectangle((0, 0), 1, 1, fill=False, linestyle="--", label="best combination"))
    fig.legend(handles=handles, fontsize=8, loc="lower center", ncol=min(len(handles), 5), frameon=False)
    rows = (len(handles) + 4) // 5
    fig.tight_layout(rect=(0, (0.12 + 0.22 * rows) / height, 1, 1))
    # The x axis ends where the longest bar's note does: the notes are
    # measured and the axis extended just enough (log scale) to hold them.
    r = fig.canvas.get_renderer()
    frame = ax.get_window_extent(r)
    texts = [ax.text(x * 1.03, y, t, va="center", fontsize=7) for x, y, t in notes]
    la, lb = math.log(lo), math.log(hi)
    for _ in range(3):
        need = lb
        for (x, _, _), t in zip(notes, texts):
            w = t.get_window_extent(r).width + 6
            frac = (frame.width - w) / frame.width
            if frac > 0.2:
                need = max(need, la + (math.log(x * 1.03) - la) / frac)
        if need <= lb + 1e-9:
            break
        lb = need
        ax.set_xlim(lo, math.exp(lb))
    _log_axis(ax.xaxis, lo, math.exp(lb))
    return fig


def plot_summary(df, tests, factors, path):
    """Figure 10 (summary of results by benchmark): one horizontal bar per
    test (input order, top down), x the improvement factor over no
    optimisation on a log scale. The bar is the uppermost path across the
    improvement lattice (uppermost_path), one segment per optimisation in
    the order the path enables them, coloured by optimisation, so the larger
    gains come first, on the left; a step that makes things worse is drawn
    hatched, back over the bar. The filled bar ends at the improvement with
    every optimisation on; when some combination does better, a dashed
    outline extends the bar to that best improvement (the paper's dashed
    regions), named at its end. The x axis spans the data and the notes at
    the bars' ends, no more; the legend sits under the axis."""
    return _finish(summary_figure(df, tests, factors), path)


# ------------------------------------------------------------ markdown
# Numbers in the tables: a fixed number of significant digits, never an
# exponent, and 0 for float noise (a value smaller than NOISE_REL times the
# table's scale, such as a coefficient of -6.4e-13 s that an exact fit
# leaves of an effect that is exactly zero).

NOISE_REL = 1e-9
MAX_DECIMALS = 12
CLOCKS = {"modeled": "modeled seconds", "measured": "wall-clock seconds"}


def _missing(x):
    return x is None or not math.isfinite(x)


def is_noise(x, scale):
    """Whether x is float noise beside a table whose values are of size
    `scale`: |x| < NOISE_REL * |scale| (never when scale is unknown)."""
    return (scale is not None and math.isfinite(scale) and scale != 0
            and abs(x) < NOISE_REL * abs(scale))


def _plain(s):
    """A formatted number without a negative zero: -0.00 -> 0.00."""
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def sig(x, digits=4, scale=None):
    """x with `digits` significant digits in plain notation (0.0001235,
    1235, 12.35), "0" for zero and float noise (is_noise), "\u2014" when
    missing."""
    if _missing(x):
        return "\u2014"
    if x == 0 or is_noise(x, scale):
        return "0"
    dec = max(0, digits - 1 - math.floor(math.log10(abs(x))))
    if dec > MAX_DECIMALS:
        return "0"
    return _plain("%.*f" % (dec, x))


def _num(x, scale=None):
    """Seconds: two decimals from 10 up (as the paper), else 4 significant
    digits (the runs of a userspace benchmark may take milliseconds); 0 for
    float noise beside `scale`."""
    if _missing(x):
        return "\u2014"
    if x == 0 or is_noise(x, scale):
        return "0"
    return _plain("%.2f" % x) if abs(x) >= 10 else sig(x, 4, scale)


def _pct(x, scale=100.0):
    """Percentage points, two decimals as in the paper; 0 for float noise."""
    if _missing(x):
        return "\u2014"
    if x == 0 or is_noise(x, scale):
        return "0"
    return _plain("%.2f" % x)


def _p(p):
    """A p-value: two significant digits, "<0.0001" below that."""
    if _missing(p):
        return "\u2014"
    return "<0.0001" if p < 1e-4 else sig(p, 2)


def clock(cfg):
    """What the seconds of a results directory are, from its paper.json
    (`cfg`, a dict): "modeled" (`ufskit bench paper`: a disk model and a CPU
    model, the 2002 machine), "measured" (scripts/paper-mount.sh: profile
    mount-*, a disk "... (wall clock)") or None (unknown)."""
    if not isinstance(cfg, dict):
        return None
    prof = cfg.get("profile")
    pname = prof.get("name") if isinstance(prof, dict) else prof
    disk = str(cfg.get("disk") or "")
    if (isinstance(pname, str) and pname.startswith("mount")) or "wall clock" in disk:
        return "measured"
    cpu = cfg.get("cpu_model")
    if disk and cpu:
        return "modeled"
    return None


def time_unit(clk):
    """The unit of a time column, in words: modeled seconds, wall-clock
    seconds or seconds."""
    return CLOCKS.get(clk, "seconds")


def rank_heads(factors, unit="seconds"):
    """The rank table's column headings: the factors' labels, then what the
    numbers are, in words, with their unit."""
    return [label(f) for f in factors] + ["mean (%s)" % unit, "time (% of none)",
                                          "\u03c3/\u221an, standard error (% of none)",
                                          "\u03c3/\u221an, standard error (%s)" % unit, "runs"]


def model_heads(unit="seconds"):
    return ["term", "\u0394 %Time, effect (percentage points of none)", "\u03c3, standard error (points)",
            "p-value", "effect (%s)" % unit]


def rank_cells(r, base):
    """The numbers of a rank table row (a dict of rank_table or its JSON)."""
    return [_num(r["mean_s"], base), _pct(r["time_pct"]), _pct(r["se_pct"]), _num(r["se_s"], base),
            str(r["n"])]


def model_cells(r, base):
    """The numbers of a model row (a dict of fit_model or its JSON)."""
    def f(x):
        return float("nan") if x is None else float(x)
    return [_pct(f(r["estimate"])), _pct(f(r["se"])), _p(f(r["p"])), _num(f(r["estimate_s"]), base)]


def markdown_rank(table, unit="seconds"):
    """A rank_table as a markdown table (the paper's Table 1 columns, with
    the standard error in seconds too)."""
    factors = table.attrs["factors"]
    base = table.attrs["base_mean_s"]
    heads = rank_heads(factors, unit)
    lines = ["### Rank table: %s" % table.attrs["test"], "",
             "Ranked by mean time; time is relative to no optimisation (none: %s %s = 100%%); "
             "\u03c3/\u221an is the standard error of the mean." % (_num(base), unit), "",
             "| " + " | ".join(heads) + " |",
             "|" + "|".join([":-:"] * len(factors) + ["--:"] * 5) + "|"]
    for _, r in table.iterrows():
        cells_ = [r[label(f)] for f in factors] + rank_cells(r, base)
        lines.append("| " + " | ".join(cells_) + " |")
    return "\n".join(lines) + "\n"


def markdown_model(model, unit="seconds"):
    """A linear_model table as markdown (the paper's Tables 2 and 3: Factor,
    Δ %Time, σ; plus the p-value and the estimate in seconds)."""
    a = model.attrs
    alpha = a.get("alpha", PAPER_ALPHA)
    if model.empty:
        shown = "no coefficients"
    elif model["p"].isna().all():
        shown = "every coefficient shown"
    else:
        shown = "base and the coefficients with p < %g shown" % alpha
    dof = "%g" % a["df_resid"] if a["df_resid"] is not None else "no"
    lines = ["### Linear model coefficients: %s" % a["test"], "",
             "`%s`, pct = 100 \u00b7 seconds / mean of no optimisation; %d runs, %s residual dof; %s."
             % (a["formula"], a["nobs"], dof, shown)]
    if a.get("note"):
        lines += ["", "Note: %s." % a["note"]]
    lines += ["", "| " + " | ".join(model_heads(unit)) + " |", "|:--|--:|--:|--:|--:|"]
    for _, r in model.iterrows():
        lines.append("| %s | %s |" % (r["term"], " | ".join(model_cells(r, a["base_mean_s"]))))
    return "\n".join(lines) + "\n"


def markdown_tables(df, factors=None, alpha=PAPER_ALPHA, tests=None, unit="seconds"):
    """Every test's rank table and model table as one markdown document."""
    df, factors = prepare(df, factors)
    parts = ["# Paper tables (Dowse and Malone 2002, Tables 1\u20133 form)", ""]
    for t in tests or tests_of(df):
        parts += [markdown_rank(rank_table(df, t, factors), unit),
                  markdown_model(linear_model(df, t, factors, alpha), unit)]
    return "\n".join(parts)


# --------------------------------------------------------------- outputs

def slugs(tests):
    """A file-name-safe, distinct slug per test name."""
    out, seen = {}, set()
    for t in tests:
        s = re.sub(r"[^A-Za-z0-9._-]+", "_", t).strip("_.") or "test"
        cand, i = s, 2
        while cand in seen:
            cand, i = "%s-%d" % (s, i), i + 1
        seen.add(cand)
        out[t] = cand
    return out


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def analyse(df, factors=None, alpha=PAPER_ALPHA, tests=None):
    """Everything the tables and figures show, as a JSON-able dict:
    {factors, labels, names, alpha, response, tests: [{test, base_mean_s,
    rank_table: [rows], model: {formula, nobs, df_resid, rsquared, note,
    coefficients: [every term, with `significant`]}, significant: [terms],
    effects: {factor: speed-up}, effect_order, summary: {path, all_on,
    best, best_improvement}}]}."""
    df, factors = prepare(df, factors)
    out = dict(factors=factors, labels={f: label(f) for f in factors}, names={f: name(f) for f in factors},
               alpha=alpha, response="pct = 100 * seconds / mean seconds with no optimisation", tests=[])
    for t in tests or tests_of(df):
        rt = rank_table(df, t, factors)
        full = fit_model(df, t, factors)
        sig = linear_model(df, t, factors, alpha)
        coeffs = full.to_dict("records")
        sig_terms = list(sig["term"]) if not sig["p"].isna().all() else []
        for r in coeffs:
            r["significant"] = (None if not math.isfinite(r["p"]) else bool(r["p"] < alpha))
        rows = rt.reset_index().to_dict("records")
        for r in rows:
            r["enabled"] = [f for f in factors if r[label(f)]]
        a = full.attrs
        out["tests"].append(dict(
            test=t, base_mean_s=rt.attrs["base_mean_s"], rank_table=rows,
            model=dict(formula=a["formula"], nobs=a["nobs"], df_resid=a["df_resid"], rsquared=a["rsquared"],
                       note=a["note"], coefficients=coeffs),
            significant=sig_terms, effects=effects(df, t, factors),
            effect_order=effect_order(df, t, factors), summary=summary(df, t, factors)))
    return _jsonable(out)


def _draw(job):
    plot, df, what, factors, path = job
    return plot(df, what, factors, path)


def _draw_all(df, factors, figures):
    """Draws the figures [(plot function, test or tests, path)], on as many
    processes as the machine has CPUs (forked: each starts with the data in
    memory; a figure depends on nothing but its arguments, so the files are
    those a single process writes); returns their paths in order."""
    jobs = [(plot, df, what, factors, path) for plot, what, path in figures]
    n = min(len(jobs), len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    if n <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        return [_draw(j) for j in jobs]
    with multiprocessing.get_context("fork").Pool(n) as pool:
        return pool.map(_draw, jobs, chunksize=1)


def write_outputs(df, outdir, factors=None, alpha=PAPER_ALPHA, tests=None, source=None, clock=None):
    """Writes every table, figure and paper_stats.json into `outdir` (made
    if missing); returns the paths written. `clock` ("modeled", "measured"
    or None, see clock()) names the time columns' unit and is recorded in
    paper_stats.json."""
    df, factors = prepare(df, factors)
    tests = tests or tests_of(df)
    os.makedirs(outdir, exist_ok=True)
    written = []

    def put(fname, text):
        p = os.path.join(outdir, fname)
        with open(p, "w", encoding="utf-8") as f:
            f.write(text)
        written.append(p)

    doc = analyse(df, factors, alpha, tests)
    doc["source"] = source
    doc["clock"] = clock
    doc["time_unit"] = unit = time_unit(clock)
    names = slugs(tests)
    figures = []  # (plot function, test or tests, path), drawn at the end
    combined = ["# Paper tables (Dowse and Malone 2002, Tables 1\u20133 form)", ""]
    for entry in doc["tests"]:
        t = entry["test"]
        s = names[t]
        rank_md = markdown_rank(rank_table(df, t, factors), unit)
        model_md = markdown_model(linear_model(df, t, factors, alpha), unit)
        put("rank_%s.md" % s, rank_md)
        put("model_%s.md" % s, model_md)
        combined += [rank_md, model_md]
        f8, f9 = "fig8_improvement_%s.png" % s, "fig9_lattice_%s.png" % s
        figures += [(plot_improvement, t, os.path.join(outdir, f8)), (plot_lattice, t, os.path.join(outdir, f9))]
        entry["files"] = dict(rank="rank_%s.md" % s, model="model_%s.md" % s, fig8=f8, fig9=f9)
    put("paper_tables.md", "\n".join(combined))
    figures.append((plot_summary, tests, os.path.join(outdir, "fig10_summary.png")))
    written += _draw_all(df, factors, figures)
    doc["files"] = dict(tables="paper_tables.md", fig10="fig10_summary.png")
    put("paper_stats.json", json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return written


def main(argv):
    prog = os.path.basename(argv[0])
    ap = argparse.ArgumentParser(prog=prog, description="Tables 1-3 and Figures 8-10 of the FFS "
                                 "optimisations paper from a factorial benchmark's runs.")
    ap.add_argument("results", help="CSV or JSON: one row per run (test, factors, run, seconds)")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--factors", help="comma-separated 0/1 factor columns, exactly and in order "
                    "(default: those of su,dp,vm,dh present)")
    ap.add_argument("--alpha", type=float, default=PAPER_ALPHA,
                    help="significance level of the model tables (default %(default)s, the paper's)")
    ap.add_argument("--tests", help="comma-separated tests to analyse (default: all, in input order)")
    ap.add_argument("--clock", choices=sorted(CLOCKS),
                    help="what the seconds are: modeled (the 2002 machine of `ufskit bench paper`) or "
                    "measured (wall clock); default: from the paper.json beside RESULTS, if any")
    args = ap.parse_args(argv[1:])
    if not 0 < args.alpha < 1:
        ap.error("--alpha must be between 0 and 1")
    listed = [f.strip() for f in args.factors.split(",") if f.strip()] if args.factors else None
    try:
        df, factors = prepare(read_results(args.results), listed)
        tests = tests_of(df)
        if args.tests:
            want = [t.strip() for t in args.tests.split(",") if t.strip()]
            unknown = [t for t in want if t not in tests]
            if unknown:
                raise BadInput("no runs of test(s) %s" % ", ".join(unknown))
            tests = want
    except BadInput as e:
        print("%s: %s: %s" % (prog, args.results, e), file=sys.stderr)
        return 1
    clk = args.clock
    if clk is None:
        try:
            clk = clock(plotenv.read_json(os.path.join(os.path.dirname(os.path.abspath(args.results)),
                                                       "paper.json")))
        except BadInput:
            clk = None
    for p in write_outputs(df, args.out, factors, args.alpha, tests, source=args.results, clock=clk):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
