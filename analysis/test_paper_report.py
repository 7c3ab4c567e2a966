#!/usr/bin/env python3
"""Test for paper_report.py (report.html and findings.md of `ufskit bench
paper`) on a synthetic paper.csv whose effects are planted:
- tests shaped like the paper's claims (folder: SU x29/x13/x77 and dirhash
  x12/x38/x3 only with soft updates; read-only tests with no SU effect;
  dirpref 10-20% on traversal tests, not on Andrew's compile; vmiodir 2%;
  an overlapping DP:VM on Andrew's grep; build-compile with Table 2's
  coefficients; Bonnie++ with dirhash except sequential stat), each claim's
  verdict must be "agrees"; one planted contradiction (Postmark: dirhash
  with soft updates slows 20,000 files down) must be "disagrees"; claims
  whose tests are missing "not measured";
- paper_stats.py then paper_report.py end to end: findings.md and
  report.html written and printed; the page self-contained (no http(s)://,
  every src a data: URI, no src="file", no <link>, no url()); every figure
  of paper_stats.json (and the dirhash figures present) embedded byte for
  byte with its data-figure name; explanations.json overriding the "why"
  column; paper_stats.json computed by the report when missing;
- if chromium is installed, the page rendered headless: #figure-check says
  N/N with N the number of embedded images (SKIP without chromium, a
  failure if UFSKIT_REQUIRE_CHROMIUM=1);
- the further factors (su, dh, io, gd varied; dp, vm held at 0): inode
  order saving on the large-directory listings and the growing dirhash
  budget on maildir give claims m and n "agrees"; no inode-order effect
  gives m "disagrees";
- a missing or malformed paper.csv and a bad explanations.json rejected
  with exit 1 and a message.
Plain python; exits non-zero on failure.
usage: python3 analysis/test_paper_report.py"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import plotenv

plotenv.load(__file__)  # re-runs this under the Python that has pandas
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

import paper_report as pr  # noqa: E402
import render_report  # noqa: E402
import plottest  # noqa: E402
from plottest import check  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
STATS = os.path.join(HERE, "paper_stats.py")
REPORT = os.path.join(HERE, "paper_report.py")
FACTORS = ["su", "dp", "vm", "dh"]
RUNS = 3
NOISE = 0.002  # relative standard deviation of a run


def mult(c, su=1.0, dp=1.0, vm=1.0, dh=1.0, dh_su=1.0):
    """Multiplicative effects: each factor on multiplies the time by its
    value; dh_su applies when both dirhash and soft updates are on."""
    t = 1.0
    for f, v in (("su", su), ("dp", dp), ("vm", vm), ("dh", dh)):
        if c[f]:
            t *= v
    return t * (dh_su if c["su"] and c["dh"] else 1.0)


def andrew_grep(c):
    # dirpref 12%, vmiodir 10%, together 14%: an overlap of 8 points.
    dv = {(0, 0): 1.0, (1, 0): 0.88, (0, 1): 0.90, (1, 1): 0.86}[(c["dp"], c["vm"])]
    return dv * (1.007 if c["su"] else 1.0)


def table2(c):
    return (100 - 42.71 * c["su"] - 14.28 * c["dp"] - 1.91 * c["vm"] + 4.57 * c["su"] * c["dp"]) / 100


# test: (unoptimised seconds, relative time of a combination)
PLANTED = {
    "folder-create": (300.0, lambda c: mult(c, su=1 / 29, dh_su=1 / 12)),
    "folder-pack": (200.0, lambda c: mult(c, su=1 / 13, dh_su=1 / 38)),
    "folder-remove": (100.0, lambda c: mult(c, su=1 / 77, dh_su=1 / 3)),
    "tar-extract": (500.0, lambda c: mult(c, su=1 / 2.5, dp=0.85)),
    "tar-find": (40.0, lambda c: mult(c, dp=0.85)),
    "tar-remove": (200.0, lambda c: mult(c, su=1 / 3, dp=0.85)),
    "andrew-grep": (60.0, andrew_grep),
    "andrew-compile": (400.0, lambda c: mult(c, su=1 / 1.2, vm=0.98)),
    "build-compile": (4345.38, table2),
    "postmark-10k": (100.0, lambda c: mult(c, su=1 / 3, dh_su=0.985)),
    # The planted contradiction: dirhash with soft updates slows 20,000 files by 3%.
    "postmark-20k": (200.0, lambda c: mult(c, su=1 / 3, dh_su=1.03)),
    "bonnie-rand-create": (80.0, lambda c: mult(c, su=1 / 2.2, dh=0.98, dh_su=1 / 1.5 / 0.98)),
    "bonnie-seq-stat": (10.0, lambda c: 1.0),
}
EXPECTED = dict.fromkeys("abcdefghikl", "agrees")
EXPECTED["j"] = "disagrees"
EXPECTED.update(m="not measured", n="not measured")  # no io or gd factor in this design
CLAIM_IDS = "abcdefghijklmn"

# The further factors: su, dh, io, gd varied, dp and vm held at 0 as
# `ufskit bench paper --factors su,dh,io,gd` writes them.
FURTHER = ["su", "dh", "io", "gd"]


def further_planted(io_helps=True):
    """test: (seconds, relative time); gd acts only with dirhash on."""
    def gd(c, v):
        return v if c["gd"] and c["dh"] else 1.0
    io_ls, io_find = (0.80, 0.85) if io_helps else (1.0, 1.0)
    return {
        "largedir-ls": (1.0, lambda c: (io_ls if c["io"] else 1.0) * (0.98 if c["dh"] else 1.0)),
        "largedir-find": (1.2, lambda c: (io_find if c["io"] else 1.0)),
        "tar-extract": (500.0, lambda c: mult(c, su=1 / 2.5) * (1.002 if c["io"] else 1.0)),
        "maildir-imap": (700.0, lambda c: mult(c, su=1 / 20, dh=0.99) * gd(c, 0.92)),
        "maildir-poll": (20.0, lambda c: mult(c, dh=0.9) * gd(c, 0.90)),
    }


def further(io_helps=True, recycle=True, refuse=False, seed=5):
    rng = np.random.RandomState(seed)
    k = len(FURTHER)
    rows = []
    for i in range(2 ** k):
        c = dict(zip(FURTHER, ((i >> (k - 1 - j)) & 1 for j in range(k))))
        c.update(dp=0, vm=0)
        for r in range(RUNS):
            for t, (base, rel) in further_planted(io_helps).items():
                bound = recycle and t.startswith("maildir") and c["dh"] and not c["gd"]
                rows.append(dict(test=t, run=r, seconds=base * rel(c) * (1 + rng.normal(0, NOISE)),
                                 dh_recycled=40 if bound else 0, dh_build_refused=0, **c))
    df = pd.DataFrame(rows)
    if refuse:  # the budget binds by refusing builds, never recycling
        bound = df["test"].str.startswith("maildir") & (df["dh"] == 1) & (df["gd"] == 0)
        df.loc[bound, "dh_build_refused"] = 25
    return df


def combos():
    return [dict(zip(FACTORS, ((i >> (3 - j)) & 1 for j in range(4)))) for i in range(16)]


def synthetic(tests=None, seed=4):
    rng = np.random.RandomState(seed)
    rows = []
    for c in combos():
        for r in range(RUNS):
            for t, (base, rel) in PLANTED.items():
                if tests and t not in tests:
                    continue
                s = base * rel(c) * (1 + rng.normal(0, NOISE))
                rows.append(dict(test=t, run=r, seconds=s, disk_s=0.9 * s, cpu_s=0.1 * s, syncs=1, wall_ms=1.0,
                                 reads=10, writes=20, fsck_clean="true", **c))
    cols = ["test", "su", "dp", "vm", "dh", "run", "seconds", "disk_s", "cpu_s", "syncs", "wall_ms",
            "reads", "writes", "fsck_clean"]
    return pd.DataFrame(rows)[cols]


PAPER_JSON = {"profile": {"name": "synthetic", "messages": 33164}, "disk": "ide-20g-2001",
              "disk_description": "a planted disk", "cpu_model": {"name": "planted-cpu", "lookup_us": 5.0},
              "workloads": ["planted"], "runs": [], "wall_s": 1.0}


def run(*args, script=REPORT):
    return subprocess.run([sys.executable, script] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=900)


def write_dir(d, df):
    os.makedirs(d, exist_ok=True)
    df.to_csv(os.path.join(d, "paper.csv"), index=False)
    with open(os.path.join(d, "paper.json"), "w") as f:
        json.dump(PAPER_JSON, f)


def tiny_png(path):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(2, 1.5))
    ax.plot([0, 1], [0, 1])
    fig.savefig(path, dpi=50)
    plt.close(fig)


def check_verdicts_in_process():
    df, factors = pr.ps.prepare(synthetic(), None)
    rows = {r["id"]: r for r in pr.findings(pr.Data(df, factors))}
    for cid, want in EXPECTED.items():
        check(rows[cid]["verdict"] == want, "claim %s: %s, want %s (measured: %s; %s)"
              % (cid, rows[cid]["verdict"], want, rows[cid]["measured"], rows[cid]["details"]))
    # Only the tar tests: the folder, Andrew, build, Bonnie++ and Postmark claims are not measured.
    tar = [t for t in PLANTED if t.startswith("tar-")]
    df2, _ = pr.ps.prepare(synthetic(tar), None)
    rows2 = {r["id"]: r for r in pr.findings(pr.Data(df2, factors))}
    for cid in "fgijkl":
        check(rows2[cid]["verdict"] == "not measured", "tar only, claim %s: %s (%s)"
              % (cid, rows2[cid]["verdict"], rows2[cid]["measured"]))
    check(rows2["d"]["verdict"] == "agrees", "tar only, claim d: %s" % rows2["d"]["verdict"])
    # A combination missing: that test is left out, the rest still judged.
    holed = synthetic()
    holed = holed[~((holed["test"] == "tar-extract") & (holed["su"] == 1) & (holed["dp"] == 0)
                    & (holed["vm"] == 0) & (holed["dh"] == 0))]
    df3, _ = pr.ps.prepare(holed, None)
    d3 = pr.Data(df3, factors)
    rows3 = {r["id"]: r for r in pr.findings(d3)}
    check(d3.incomplete == ["tar-extract"] and "tar-extract" not in d3.tests, "incomplete test left out")
    check(rows3["g"]["verdict"] == "agrees" and rows3["j"]["verdict"] == "disagrees",
          "a test with a hole leaves the other verdicts alone")
    check(not pr.read_only("tar-extract") and pr.read_only("tar-find") and pr.read_only("bonnie-seq-stat")
          and pr.read_only("maildir-poll") and not pr.read_only("largedir-create"), "read-only classification")


def check_further_factors():
    """Claims m (inode order, seed 001) and n (growing dirhash, seed 002)
    on planted effects; the factors held at 0 are not factors."""
    df, factors = pr.ps.prepare(further(), None)
    check(factors == FURTHER, "factors of a su,dh,io,gd design: %s" % factors)
    rows = {r["id"]: r for r in pr.findings(pr.Data(df, factors))}
    for cid in "mn":
        check(rows[cid]["verdict"] == "agrees", "claim %s: %s (measured: %s; %s)"
              % (cid, rows[cid]["verdict"], rows[cid]["measured"], rows[cid]["details"]))
    check("largedir-ls 20" in rows["m"]["measured"], "claim m measures the ls saving: %s" % rows["m"]["measured"])
    for cid in "dfl":  # no dirpref or vmiodir factor, no build
        check(rows[cid]["verdict"] == "not measured", "claim %s without its factors: %s"
              % (cid, rows[cid]["verdict"]))
    df2, _ = pr.ps.prepare(further(io_helps=False), None)
    rows2 = {r["id"]: r for r in pr.findings(pr.Data(df2, factors))}
    check(rows2["m"]["verdict"] == "disagrees", "inode order without effect: claim m %s (%s)"
          % (rows2["m"]["verdict"], rows2["m"]["measured"]))
    # The fixed budget never recycled: the claim's premise is absent.
    df3, _ = pr.ps.prepare(further(recycle=False), None)
    rows3 = {r["id"]: r for r in pr.findings(pr.Data(df3, factors))}
    check(rows3["n"]["verdict"] == "not measured" and "held every index" in rows3["n"]["measured"],
          "no recycling with 2 MiB: claim n %s (%s)" % (rows3["n"]["verdict"], rows3["n"]["measured"]))
    # Refused builds alone show the budget binds: judged, not "not measured".
    df4, _ = pr.ps.prepare(further(recycle=False, refuse=True), None)
    rows4 = {r["id"]: r for r in pr.findings(pr.Data(df4, factors))}
    check(rows4["n"]["verdict"] == "agrees", "refused builds with 2 MiB: claim n %s (%s)"
          % (rows4["n"]["verdict"], rows4["n"]["measured"]))


def render(exe, page):
    """(rendered, total) of #figure-check once chromium has loaded `page`;
    None (and a failure) if it could not."""
    try:
        return render_report.render(page, exe)
    except render_report.RenderError as e:
        check(False, str(e))
        return None


def chromium_check(report, n_images):
    """Renders `report` headless; the #figure-check text must be N/N. A
    copy with one image's data broken must say (N-1)/N."""
    exe = shutil.which("chromium")
    if not exe:
        if os.environ.get("UFSKIT_REQUIRE_CHROMIUM") == "1":
            check(False, "chromium not installed but UFSKIT_REQUIRE_CHROMIUM=1")
        else:
            print("SKIP: chromium not installed; report.html not rendered")
        return None
    got = render(exe, report)
    if got:
        check(got[0] == got[1] == n_images and n_images > 0, "figures rendered %d/%d, want %d/%d"
              % (got[0], got[1], n_images, n_images))
    with open(report, encoding="utf-8") as f:
        page = f.read()
    broken = os.path.join(os.path.dirname(report), "broken.html")
    with open(broken, "w", encoding="utf-8") as f:
        f.write(page.replace("base64,iVBOR", "base64,AAAA", 1))
    bad = render(exe, broken)
    check(bad == (n_images - 1, n_images), "a broken image is counted: %s, want %d/%d"
          % (bad, n_images - 1, n_images))
    return "%d/%d" % got if got else None


def check_end_to_end(tmp):
    d = os.path.join(tmp, "out")
    write_dir(d, synthetic())
    for name in ("fig2_create.png", "fig4_stat_seq.png"):  # some of the dirhash figures
        tiny_png(os.path.join(d, name))
    with open(os.path.join(d, "explanations.json"), "w") as f:
        json.dump({"j": "planted: dirhash slows Postmark down"}, f)
    r = run(os.path.join(d, "paper.csv"), "--out", d, script=STATS)
    check(r.returncode == 0, "paper_stats.py exits 0 (%s)" % r.stderr.strip())
    r = run(d, "--title", "Planted <report>")
    check(r.returncode == 0, "paper_report.py exits 0 (%s)" % r.stderr.strip())
    printed = r.stdout.splitlines()
    md, rep = os.path.join(d, "findings.md"), os.path.join(d, "report.html")
    for p in (md, rep):
        check(os.path.isfile(p) and os.path.getsize(p) > 0 and p in printed, "%s written and printed" % p)
    check(os.path.join(d, "paper_stats.json") not in printed, "an up-to-date paper_stats.json is reused")
    if not (os.path.isfile(md) and os.path.isfile(rep)):
        return None
    with open(md, encoding="utf-8") as f:
        text = f.read()
    lines = {m.group(1): m.group(2) for m in re.finditer(r"^\| ([a-n]) \|(.*)$", text, re.M)}
    check(sorted(lines) == list(CLAIM_IDS), "findings.md: a row per claim (got %s)" % sorted(lines))
    for cid, want in EXPECTED.items():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", lines.get(cid, ""))]
        check(len(cells) >= 4 and cells[2] == want, "findings.md claim %s: %s, want %s"
              % (cid, cells[2] if len(cells) > 2 else cells, want))
    check("planted: dirhash slows Postmark down |" in lines.get("j", ""), "explanations.json fills the why")
    check(lines.get("m", "").rstrip().endswith("| not measured |  |"),
          "a claim not measured has no why: %r" % lines.get("m"))
    for needle in ("gain(X|S) = m(S) / m(S+X)", "within \u00d7/\u00f7", "| id | claim | what we measured |"
                   " verdict | why |"):
        check(needle in text, "findings.md header has %r" % needle)

    with open(rep, encoding="utf-8") as f:
        page = f.read()
    for bad in ("http://", "https://", 'src="file', "<link", "url("):
        check(bad not in page, "report.html self-contained: no %r" % bad)
    srcs = re.findall(r'\ssrc="([^"]*)"', page)
    check(srcs and all(s.startswith("data:image/png;base64,") for s in srcs), "every src is a data: URI")
    figs = dict(re.findall(r'<img data-figure="([^"]+)"[^>]*src="data:image/png;base64,([^"]+)"', page))
    with open(os.path.join(d, "paper_stats.json")) as f:
        doc = json.load(f)
    want = [doc["files"]["fig10"]] + [e["files"][k] for e in doc["tests"] for k in ("fig8", "fig9")]
    want += ["fig2_create.png", "fig4_stat_seq.png"]
    check(len(figs) == len(want) == page.count("<img ") == len(srcs), "%d images embedded, want %d"
          % (len(figs), len(want)))
    for name in want:
        with open(os.path.join(d, name), "rb") as f:
            raw = f.read()
        check(name in figs and base64.b64decode(figs[name]) == raw, "%s embedded byte for byte" % name)
    check("Planted &lt;report&gt;" in page, "title escaped")
    check('id="figure-check"' in page and "naturalWidth" in page, "figure check element and script")
    check("ide-20g-2001" in page and "planted-cpu" in page and "synthetic" in page, "configuration shown")
    check(page.count("<td>folder-create</td>") == 16 * RUNS, "every run listed")
    check("fsck clean after every run" in page, "fsck status summarised")
    check("Table 1 form" in page and "Tables 2\u20133 form" in page, "rank and model tables")
    return chromium_check(rep, len(figs))


def check_computes_stats(tmp):
    """No paper_stats.json: the report runs paper_stats' functions itself."""
    d = os.path.join(tmp, "bare")
    write_dir(d, synthetic(["folder-remove", "tar-find"]))
    os.unlink(os.path.join(d, "paper.json"))
    r = run(d)
    check(r.returncode == 0, "report without paper_stats.json exits 0 (%s)" % r.stderr.strip())
    for name in ("paper_stats.json", "fig10_summary.png", "fig8_improvement_folder-remove.png",
                 "findings.md", "report.html"):
        check(os.path.join(d, name) in r.stdout.splitlines(), "%s computed and printed" % name)
    try:
        with open(os.path.join(d, "report.html"), encoding="utf-8") as f:
            page = f.read()
        check(page.count("<img ") == 5, "5 figures embedded (got %d)" % page.count("<img "))
        check("paper.json not found" in page, "missing paper.json said")
    except OSError as e:
        check(False, "report.html: %s" % e)


def check_bad_inputs(tmp):
    good = synthetic(["tar-find"])
    cases = {
        "missing paper.csv": (None, None, "no such file"),
        "empty paper.csv": ("", None, "empty"),
        "not CSV": ("a,b\n1,2,3,4\n\"", None, "paper.csv"),
        "no seconds": (good.drop(columns="seconds").to_csv(index=False), None, "'seconds'"),
        "factor 2": (good.assign(dp=good["dp"] * 2).to_csv(index=False), None, "0 or 1"),
        "bad explanations": (good.to_csv(index=False), "[1, 2]", "explanations.json"),
        "unknown claim": (good.to_csv(index=False), '{"z": "x"}', "unknown claim"),
    }
    for label, (csv, expl, needle) in cases.items():
        d = os.path.join(tmp, "bad-" + label.replace(" ", "-"))
        os.makedirs(d)
        if csv is not None:
            with open(os.path.join(d, "paper.csv"), "w") as f:
                f.write(csv)
        if expl is not None:
            with open(os.path.join(d, "explanations.json"), "w") as f:
                f.write(expl)
        r = run(d)
        check(r.returncode == 1, "%s: exits 1 (rc=%d)" % (label, r.returncode))
        check(needle in r.stderr, "%s: message mentions %r (got: %s)" % (label, needle, r.stderr.strip()))
        check("Traceback" not in r.stderr, "%s: no traceback" % label)
        check(not os.path.exists(os.path.join(d, "report.html")), "%s: nothing written" % label)
    r = run()
    check(r.returncode == 2, "no DIR: usage, exit 2 (rc=%d)" % r.returncode)
    return len(cases)


def main():
    start = time.time()
    check_verdicts_in_process()
    check_further_factors()
    with tempfile.TemporaryDirectory(prefix="paper-report-test.") as tmp:
        rendered = check_end_to_end(tmp)
        check_computes_stats(tmp)
        bad = check_bad_inputs(tmp)
    if plottest.failures:
        print("%d check(s) failed" % len(plottest.failures))
        return 1
    print("ok: verdicts of %d claims, self-contained report, %s, %d bad inputs rejected (%.0f s)"
          % (len(EXPECTED), "chromium rendered %s figures" % rendered if rendered else "not rendered",
             bad, time.time() - start))
    return 0


if __name__ == "__main__":
    sys.exit(main())
