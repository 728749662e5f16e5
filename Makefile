# The two commands of the README. Both create .venv (Python 3.11) on first use and reuse it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo demo-import test lint schemas clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev,local]'
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
	@# headless Chromium for tests/test_report.py (as root, e.g. in .ci/run; skipped without it)
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) || echo "warning: could not install chromium chromium-driver: the browser tests will skip"
	$(VENV)/bin/ruff check otelcar tests benchmarks fixtures examples
	$(VENV)/bin/ruff format --check otelcar tests benchmarks fixtures examples
	$(VENV)/bin/python -m pytest -q

## schemas: regenerate the generated contracts and the CLI reference (tests check both)
schemas: $(STAMP)
	$(VENV)/bin/otelcar schema --write schemas
	$(VENV)/bin/python -m otelcar.cli_reference > docs/cli.md

clean:
	rm -rf $(VENV) .otelcar .otelcar-demo .pytest_cache
