# The two commands of the README. Both create .venv (Python 3.11) on first use and reuse it.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: demo test lint schemas clean

$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## demo: set up, then import the committed agent traces and show one as a steps table
demo: $(STAMP)
	rm -rf .otelcar-demo
	$(VENV)/bin/otelcar --store .otelcar-demo import fixtures/otlp
	$(VENV)/bin/otelcar --store .otelcar-demo traces
	$(VENV)/bin/otelcar --store .otelcar-demo show c2b9546e --full

## test: set up, then lint and run the whole test suite
test: $(STAMP)
	$(VENV)/bin/ruff check otelcar tests benchmarks fixtures
	$(VENV)/bin/ruff format --check otelcar tests benchmarks fixtures
	$(VENV)/bin/python -m pytest -q

## schemas: regenerate the generated contracts and the CLI reference (tests check both)
schemas: $(STAMP)
	$(VENV)/bin/otelcar schema --write schemas
	$(VENV)/bin/python -m otelcar.cli_reference > docs/cli.md

clean:
	rm -rf $(VENV) .otelcar .otelcar-demo .pytest_cache
