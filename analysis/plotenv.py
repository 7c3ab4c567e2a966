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
