"""The results of `cohort bench` (results.json; docs/results-format.md):
what identifies one, reading it back for `cohort report`, and the band a
baseline's D1 misses spread over when its layout is moved."""

import json
from pathlib import Path

from cohort.errors import CohortError

FORMAT = "cohort-results"
VERSION = 1


def load_results(path):
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise CohortError(f"{path}: no such results file") from None
    except (OSError, ValueError) as e:
        raise CohortError(f"{path}: not a results file ({e.__class__.__name__})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CohortError(f"{path}: not a Cohort results file")
    if data.get("version") != VERSION:
        raise CohortError(f"{path}: results version {data.get('version')} is not supported")
    for key in ("workload", "summary", "ratios", "trials", "parameters"):
        if key not in data:
            raise CohortError(f"{path}: corrupt results (no '{key}')")
    return data


def layout_band(base):
    """[low, high]: the baseline's D1 misses over its moved layouts and its
    own run, as ratios to its own run; None without moved layouts."""
    moved = base.get("layouts") or []
    if not moved or not base.get("D1_misses"):
        return None
    d1 = [base["D1_misses"], *(m["D1_misses"] for m in moved)]
    return [min(d1) / base["D1_misses"], max(d1) / base["D1_misses"]]
