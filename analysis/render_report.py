#!/usr/bin/env python3
"""Opens a report written by paper_report.py in headless Chromium and checks
what a reader sees:
- every figure rendered: each <img> of the file loaded and decoded (N/N,
  N the number of <img> elements in the file, N > 0);
- no test machinery on the page: no visible text "figures rendered";
- the statement of whose machine the times are of (#machine) is shown and
  says "modeled" or "wall-clock";
- no float noise in the tables: no number in exponent form (-5.8e-13) and
  no negative zero (-0.00) in any table cell.

The page carries no check of its own: this script renders a copy of it
with a probe script added at its end (in a temporary directory; the report
is self-contained), which on the load event counts the images that loaded
and records the page's visible text (innerText: what is displayed, hidden
elements and closed <details> left out), the tables' text and the
statement's into a JSON element that --dump-dom returns.

usage: python3 analysis/render_report.py REPORT.html
Exit 0 when every check passes, 1 when one fails or the page could not be
rendered, 2 on usage or when chromium is not installed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

PROBE_ID = "ufskit-render-probe"
PROBE = """<script>
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0, i;
  for (i = 0; i < imgs.length; i++) {
    if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++;
  }
  var tables = [], ts = document.getElementsByTagName("table");
  for (i = 0; i < ts.length; i++) tables.push(ts[i].innerText);
  var m = document.getElementById("machine");
  var r = {rendered: ok, total: imgs.length, visible: document.body.innerText, tables: tables,
           machine: m ? m.innerText : null};
  var out = document.createElement("script");
  out.type = "application/json";
  out.id = "%s";
  out.textContent = JSON.stringify(r).replace(/</g, "\\\\u003c");
  document.head.appendChild(out);
});
</script>""" % PROBE_ID

# A number in exponent form, or a negative zero, in a table's text.
FLOAT_NOISE = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?[eE][-+]?\d+\b|(?<![\w.])-0(?:\.0+)?(?![\d.])")


class RenderError(Exception):
    pass


def probe(page, exe=None):
    """What headless Chromium shows of `page`: a dict with rendered and
    total (images loaded, images on the page), visible (the body's
    innerText), tables (each table's innerText) and machine (the
    statement's text, None without one). RenderError if it could not."""
    exe = exe or shutil.which("chromium")
    if not exe:
        raise RenderError("chromium is not installed (apt-get install -y chromium)")
    try:
        with open(page, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise RenderError(str(e))
    at = text.rfind("</body>")
    text = (text[:at] + PROBE + text[at:]) if at >= 0 else text + PROBE
    # A profile of its own: no clash with another chromium, no need of a writable HOME.
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, "report.html")
        with open(copy, "w", encoding="utf-8") as f:
            f.write(text)
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + os.path.join(tmp, "p"),
               "--virtual-time-budget=10000", "--dump-dom", "file://" + copy]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise RenderError("chromium timed out: %s" % " ".join(cmd))
    m = re.search(r'<script type="application/json" id="%s">(.*?)</script>' % PROBE_ID, r.stdout, re.S)
    if r.returncode != 0 or not m:
        raise RenderError("chromium did not render %s (rc %d): %s"
                          % (page, r.returncode, r.stderr.strip()[-400:]))
    try:
        return json.loads(m.group(1))
    except ValueError as e:
        raise RenderError("the probe's result is not JSON: %s" % e)


def render(page, exe=None):
    """(rendered, total) of the page's images once Chromium has loaded it."""
    p = probe(page, exe)
    return p["rendered"], p["total"]


def problems(p, n_images):
    """What a reader would see wrong in the probe's result `p` of a page
    with `n_images` <img> elements: a list of sentences, empty when none."""
    out = []
    if not (p["rendered"] == p["total"] == n_images and n_images > 0):
        out.append("figures rendered %d/%d, want %d/%d" % (p["rendered"], p["total"], n_images, n_images))
    if "figures rendered" in p["visible"].lower():
        out.append("the page shows the text \"figures rendered\"")
    machine = (p.get("machine") or "").strip()
    if not machine:
        out.append("no statement of whose machine the times are of (#machine) shown")
    elif "modeled" not in machine and "wall-clock" not in machine:
        out.append("the machine statement says neither modeled nor wall-clock: %r" % machine[:200])
    noise = sorted({m.group(0) for t in p["tables"] for m in FLOAT_NOISE.finditer(t)})
    if noise:
        out.append("float noise in the tables: %s" % ", ".join(noise[:10]))
    return out


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-3], file=sys.stderr)
        return 2
    page = argv[1]
    try:
        with open(page, encoding="utf-8") as f:
            n = len(re.findall(r"<img\b", f.read()))
    except OSError as e:
        print("render_report.py: %s" % e, file=sys.stderr)
        return 1
    if not shutil.which("chromium"):
        print("render_report.py: chromium is not installed (apt-get install -y chromium)", file=sys.stderr)
        return 2
    try:
        p = probe(page)
    except RenderError as e:
        print("render_report.py: %s" % e, file=sys.stderr)
        return 1
    bad = problems(p, n)
    for b in bad:
        print("render_report.py: %s: %s" % (page, b), file=sys.stderr)
    print("%s: figures rendered %d/%d (%d images in the file); machine statement %s; %d tables, %s"
          % (page, p["rendered"], p["total"], n, "shown" if (p.get("machine") or "").strip() else "missing",
             len(p["tables"]), "float noise in them" if any("float noise" in b for b in bad) else "no float noise"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
