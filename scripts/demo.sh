#!/usr/bin/env bash
# make demo: the runtime on the bundled example, side by side with glibc and jemalloc.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/demo.py "$@"
