# Cohort: `make` builds everything, `make test` runs every test, `make demo`
# runs the main job on a bundled example. Each installs what it needs.
BUILD  ?= build
VENV   ?= .venv
PY     := $(VENV)/bin/python
JOBS   ?= 2

.PHONY: all deps build venv test test-fast test-unit test-integration test-real demo bench bench-stock bench-olh clean

all: build venv

deps:
	@scripts/install-deps.sh

$(BUILD)/build.ninja: CMakeLists.txt | deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

$(PY): pyproject.toml | deps
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip >/dev/null
	$(PY) -m pip install -q -e '.[test]'
	@touch $(PY)

venv: $(PY)

# Every tier (tests/README.md): fast, unit, integration, real.
test: all
	$(PY) -m pytest -q tests

# The fast tier: the tests that need no build (the package's layout, the
# runtime's layers, mirrored constants, the planner's rules on synthetic
# profiles, bad profiles and the scripts' refusals), in seconds.
test-fast: venv
	$(PY) -m pytest -q tests/fast

# The other tiers alone, each after the build: the C unit tests and the
# built tools on their own; test programs under the preload and the
# profiler; real programs, the workloads and a new user's round.
test-unit: all
	$(PY) -m pytest -q tests/unit

test-integration: all
	$(PY) -m pytest -q tests/integration

test-real: all
	$(PY) -m pytest -q tests/real

demo: all
	@scripts/demo.sh

# Every workload: profile on train, time on ref, cachegrind; results/report.md.
# Then the cross-thread allocation stress: results/stress.md; and the pool
# API against malloc: results/pools.md.
bench: all
	$(PY) scripts/bench-suite.py
	$(PY) scripts/bench-stress.py
	$(PY) scripts/bench-pools.py

# Stock Debian programs (gawk, perl, dot, cppcheck), trained small and run
# large: results/stock/report.md.
bench-stock: all
	@scripts/install-deps.sh stock
	$(PY) scripts/bench-stock.py

# Object-Local Heaps against malloc, lists, arrays and std::map: results/olh.md.
bench-olh: all
	$(PY) scripts/bench-olh.py

clean:
	rm -rf $(BUILD)
