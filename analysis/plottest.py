"""Shared helpers of the plot scripts' tests (test_plot_*.py): failure
bookkeeping, running a plot script, checking the PNGs it writes, feeding it
bad input, and `main`, the whole test run over a test's own data."""
import json
import os
import struct
import subprocess
import sys
import tempfile

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def runner(script, python=sys.executable):
    """A function (json_path, outdir) that runs `python script json_path
    outdir` and returns the CompletedProcess; the plot scripts re-run
    themselves under the system Python when `python` lacks matplotlib."""
    def run(json_path, outdir):
        return subprocess.run([python, script, json_path, outdir],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    return run


def plot_doc(run, doc, json_path, outdir):
    """Writes `doc` as JSON to `json_path` and plots it into `outdir`."""
    with open(json_path, "w") as f:
        json.dump(doc, f)
    return run(json_path, outdir)


def png_ok(path):
    with open(path, "rb") as f:
        head = f.read(33)
    if len(head) < 33 or head[:8] != PNG_SIGNATURE or head[12:16] != b"IHDR":
        return False
    width, height = struct.unpack(">II", head[16:24])
    return width > 0 and height > 0


def check_figures(r, outdir, expected):
    """Checks that the run `r` exited 0, wrote each of `expected` in
    `outdir` as a non-empty PNG and printed its path."""
    check(r.returncode == 0, "plot exits 0 (rc=%d, stderr: %s)" % (r.returncode, r.stderr.strip()))
    printed = r.stdout.splitlines()
    for name in expected:
        path = os.path.join(outdir, name)
        check(os.path.isfile(path), "%s written" % name)
        if os.path.isfile(path):
            check(os.path.getsize(path) > 0, "%s non-empty" % name)
            check(png_ok(path), "%s is a PNG" % name)
        check(path in printed, "%s listed in the output" % name)


def check_bad_inputs(run, tmp, bad_cases, no_traceback=False):
    """Feeds each of `bad_cases` ({label: (content or None for no file,
    needle)}) to `run(json_path, outdir)`; each must exit non-zero with
    a message containing the needle (and, with `no_traceback`, no
    traceback), and none may write the output directory."""
    for label, (content, needle) in bad_cases.items():
        path = os.path.join(tmp, "bad.json")
        if os.path.exists(path):
            os.unlink(path)
        if content is not None:
            with open(path, "w") as f:
                f.write(content)
        r = run(path, os.path.join(tmp, "out-bad"))
        check(r.returncode != 0, "%s: exits non-zero" % label)
        check(needle in r.stderr, "%s: message mentions %r (got: %s)" % (label, needle, r.stderr.strip()))
        if no_traceback:
            check("Traceback" not in r.stderr, "%s: no traceback (got: %s)" % (label, r.stderr.strip()))
    check(not os.path.exists(os.path.join(tmp, "out-bad")), "bad input writes nothing")


def main(run, name, doc, expected, variant, bad_cases, no_traceback=False):
    """Runs a plot script's test and returns its exit status. `doc`, written
    as NAME.json, must plot each of `expected` into a new directory;
    `variant` = (doc, figures, what, png_what) must still plot (failing
    "WHAT (stderr: ...)") each of `figures` as a PNG (failing
    "PNG_WHAT % figure"); each of `bad_cases` must fail (check_bad_inputs)."""
    with tempfile.TemporaryDirectory(prefix="plot-%s-test." % name) as tmp:
        src = os.path.join(tmp, name + ".json")
        out = os.path.join(tmp, "out")  # does not exist yet: the script makes it
        check_figures(plot_doc(run, doc, src, out), out, expected)

        doc2, figures, what, png_what = variant
        r = plot_doc(run, doc2, src, os.path.join(tmp, "out2"))
        check(r.returncode == 0, "%s (stderr: %s)" % (what, r.stderr.strip()))
        for fig in figures:
            check(png_ok(os.path.join(tmp, "out2", fig)), png_what % fig)

        check_bad_inputs(run, tmp, bad_cases, no_traceback)

    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok: %d figures, %d bad inputs rejected" % (len(expected), len(bad_cases)))
    return 0
