import sys

try:
    from cohort.cli import main
except ModuleNotFoundError as e:
    if (e.name or "").split(".")[0] == "cohort":
        raise   # our own module missing is a bug, not a setup step
    # A checkout where `make` has not run: the Python it found lacks a
    # dependency that make installs into the checkout's virtualenv.
    from pathlib import Path
    root = Path(__file__).resolve().parent.parent
    sys.stderr.write(f"cohort: the Python module {e.name} is missing: run `make` in {root} first "
                     "(it installs what Cohort needs)\n")
    sys.exit(2)

sys.exit(main())
