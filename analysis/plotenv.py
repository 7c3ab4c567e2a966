"""Shared start of the plotting scripts: matplotlib (Agg) and pandas from
whichever Python has them. Debian installs them for /usr/bin/python3; when
the script runs under another interpreter (a pyenv one, say) that lacks
them, it is re-run under the system's."""
import os
import sys

SYSTEM_PYTHON = "/usr/bin/python3"


def load(script):
    """Returns (matplotlib, pandas) with the Agg backend selected; `script`
    is the caller's __file__, re-executed under the system Python if needed."""
    try:
        import matplotlib
        import pandas
    except ImportError as e:
        here = os.path.realpath(sys.executable or "")
        if (os.path.exists(SYSTEM_PYTHON) and here != os.path.realpath(SYSTEM_PYTHON)
                and not os.environ.get("UFSKIT_PLOT_REEXEC")):
            os.environ["UFSKIT_PLOT_REEXEC"] = "1"
            os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(script)] + sys.argv[1:])
        sys.exit("%s: %s; install them with `apt-get install -y python3-matplotlib python3-pandas`"
                 % (os.path.basename(script), e))
    matplotlib.use("Agg")
    return matplotlib, pandas


def nonneg(v):
    """Whether `v` is a non-negative JSON number (int or float, not bool)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0


class BadInput(Exception):
    """The results file is missing, malformed or not of the expected shape."""


def read_json(path):
    """The parsed contents of a results file; BadInput if it is missing,
    unreadable or not JSON."""
    import json
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise BadInput("no such file")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(str(e))
    except json.JSONDecodeError as e:
        raise BadInput("not valid JSON: %s" % e)


def save(fig, outdir, name, written):
    """Writes `fig` as OUTDIR/NAME, closes it, records the path."""
    import matplotlib.pyplot as plt
    path = os.path.join(outdir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def main(argv, load, draw):
    """The scripts' command line: RESULTS.json OUTDIR. `load(path)` parses
    (raising BadInput), `draw(data, outdir, written)` plots; the paths
    written are printed. Exit 2 on usage, 1 on bad input."""
    name = os.path.basename(argv[0])
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print("usage: %s RESULTS.json OUTDIR" % name, file=sys.stderr)
        return 2
    src, outdir = argv[1], argv[2]
    try:
        data = load(src)
    except BadInput as e:
        print("%s: %s: %s" % (name, src, e), file=sys.stderr)
        return 1
    os.makedirs(outdir, exist_ok=True)
    written = []
    draw(data, outdir, written)
    for path in written:
        print(path)
    return 0
