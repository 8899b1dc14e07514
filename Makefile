# Two commands: `make run` (the tour under MPI) and `make test` (the whole suite).
# Both build the environment first when it is missing or stale (scripts/setup_env.sh).
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.hpc-env-ready
RANKS  ?= 2
PYTEST_ARGS ?=

.PHONY: env run test lint warmup bench clean distclean

env: $(STAMP)

$(STAMP): pyproject.toml scripts/setup_env.sh
	bash scripts/setup_env.sh
	touch $@

run: env
	$(PY) -m hpc.launcher -n $(RANKS) examples/tour.py

lint: env
	$(PY) -m ruff check .

# Bytecode and kernels compiled once into the disk caches, so the suite's many processes load
# them (compileall writes bytecode even where PYTHONDONTWRITEBYTECODE is set). A kernel that
# fails here is reported and fails its tests too: the suite still runs.
warmup: env
	$(PY) -m compileall -q hpc domains io benchmarks
	-$(PY) -m hpc warmup

test: env lint warmup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: env
	$(PY) -m hpc.launcher -n $(RANKS) -m hpc bench halo --json

clean:
	rm -rf .pytest_cache .ruff_cache .hypothesis build *.egg-info
	find . -path ./$(VENV) -prune -o -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
