# The two commands of the README. Both create .venv (Python 3.11) on first use and reuse it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo demo-import test lint schemas clean

# llama-cpp-python is installed from a wheel built once for a portable CPU baseline (never the
# build machine's -march=native: on CPUs with AMX that build segfaults, and seeded outputs would
# depend on the CPU that compiled it); scripts/llama-wheel.sh says how, and where it is kept.
$(STAMP): pyproject.toml scripts/llama-wheel.sh
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	wheelhouse=$$(scripts/llama-wheel.sh $(VENV)/bin/python) && \
	  $(VENV)/bin/python -m pip install --quiet --no-deps --force-reinstall "$$wheelhouse"/llama_cpp_python-*.whl
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,local]'
	$(VENV)/bin/python -c "from otelcar.model.kernels import check_portable_build; check_portable_build()"
	touch $(STAMP)

## demo: set up, then run the refund agent on the local model until it fails, and attribute it
demo: $(STAMP)
	rm -rf demo-output
	$(VENV)/bin/python examples/refund_agent/demo.py --out demo-output

## demo-import: set up, import the committed agent traces (and broken ones), show one
demo-import: $(STAMP)
	rm -rf .otelcar-demo
	$(VENV)/bin/otelcar --store .otelcar-demo import fixtures/otlp
	$(VENV)/bin/otelcar --store .otelcar-demo traces
	$(VENV)/bin/otelcar --store .otelcar-demo show c2b9546e --full

## test: set up, then lint and run the whole test suite
test: $(STAMP)
	@# headless Chromium for tests/test_report.py (as root, e.g. in .ci/run). Without it the
	@# browser tests skip, and under CI=true they fail (tests/parts.py).
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || echo "warning: could not install chromium chromium-driver: the browser tests will skip (and fail under CI=true)"
	$(VENV)/bin/ruff check otelcar tests benchmarks fixtures examples
	$(VENV)/bin/ruff format --check otelcar tests benchmarks fixtures examples
	@# Three workers on two cores, one module each at a time (--dist loadscope): the suite
	@# waits for much of its time (servers starting, agents' processes, the model server), and
	@# a third worker fills those waits (pytest 12 min 2 s with three, 1.93 cores busy, against
	@# 15 min with two). Module- and session-scoped fixtures (the reduced demo, the model
	@# server) run once per worker that needs them, and the longest modules start first
	@# (tests/conftest.py) so the workers end together: in the order conftest gives them
	@# (--no-loadscope-reorder), not by their number of tests.
	@# `pytest -m "not slow"` is the quick local loop. Bytecode is cached even where
	@# PYTHONDONTWRITEBYTECODE is set: the suite starts hundreds of Python processes (pytest's
	@# own, the CLI, live agents), and each would otherwise compile and assert-rewrite again.
	PYTHONDONTWRITEBYTECODE= $(VENV)/bin/python -m pytest -q -n 3 --dist loadscope --no-loadscope-reorder

## schemas: regenerate the generated contracts and the CLI reference (tests check both)
schemas: $(STAMP)
	$(VENV)/bin/otelcar schema --write schemas
	$(VENV)/bin/python -m otelcar.cli.reference > docs/cli.md

clean:
	rm -rf $(VENV) .otelcar .otelcar-demo .pytest_cache
