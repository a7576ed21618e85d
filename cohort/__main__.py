import importlib.util
import sys

# The modules of pyproject.toml's dependencies (pyelftools is elftools). A
# checkout where `make` has not run finds a Python that may lack them: it
# says so in one line before any command starts, since the commands import
# them only where they need them (a traceback halfway through would be the
# first sign otherwise).
NEEDED = ("elftools", "fastjsonschema", "matplotlib", "capstone")

missing = next((m for m in NEEDED if importlib.util.find_spec(m) is None), None)
if missing is not None:
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    sys.stderr.write(f"cohort: the Python module {missing} is missing: run `make` in {root} first "
                     "(it installs what Cohort needs)\n")
    sys.exit(2)

from cohort.cli import main  # noqa: E402

sys.exit(main())
