#!/usr/bin/env python3
"""Opens a report written by paper_report.py in headless Chromium and checks
that every figure rendered: the page's own check (#figure-check, filled by
its inline script once the images have loaded) must say N/N with N equal to
the number of <img> elements in the file and N > 0.

usage: python3 analysis/render_report.py REPORT.html
Exit 0 when every figure rendered, 1 when one did not or the page could not
be rendered, 2 on usage or when chromium is not installed.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


class RenderError(Exception):
    pass


def render(page, exe=None):
    """(rendered, total) from the page's #figure-check once headless
    Chromium has loaded `page`; RenderError if it could not."""
    exe = exe or shutil.which("chromium")
    if not exe:
        raise RenderError("chromium is not installed (apt-get install -y chromium)")
    # A profile of its own: no clash with another chromium, no need of a writable HOME.
    with tempfile.TemporaryDirectory() as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
               "--virtual-time-budget=10000", "--dump-dom", "file://" + os.path.abspath(page)]
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
        except subprocess.TimeoutExpired:
            raise RenderError("chromium timed out: %s" % " ".join(cmd))
    m = re.search(r'id="figure-check"[^>]*>\s*figures rendered: (\d+)/(\d+)', r.stdout)
    if r.returncode != 0 or not m:
        raise RenderError("chromium did not render %s (rc %d): %s"
                          % (page, r.returncode, r.stderr.strip()[-400:]))
    return int(m.group(1)), int(m.group(2))


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
        ok, total = render(page)
    except RenderError as e:
        print("render_report.py: %s" % e, file=sys.stderr)
        return 1
    print("%s: figures rendered %d/%d (%d images in the file)" % (page, ok, total, n))
    return 0 if ok == total == n and n > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
