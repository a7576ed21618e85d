"""The bundled workloads (workloads/NAME) and their inputs files."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def inputs(name):
    """{'train': [args], 'ref': [args], 'cachegrind': [args]} from workloads/NAME/inputs."""
    table = {}
    for line in (ROOT / "workloads" / name / "inputs").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            key, args = line.split(":", 1)
            table[key.strip()] = args.split()
    return table


def binary(name):
    return ROOT / "build" / "workloads" / name


def names():
    """Every workload with an inputs file."""
    return sorted(p.parent.name for p in (ROOT / "workloads").glob("*/inputs"))
