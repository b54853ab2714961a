# Set-up is part of every target: a fresh clone needs only `make render` / `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
FLWR_VERSIONS := $(shell sed -n 's/^flwr==//p' requirements-flwr.txt)
FLWR_VENVS := $(foreach v,$(FLWR_VERSIONS),.venv-flwr-$(v)/.installed)
STACK ?= dev

.PHONY: render validate test schema clean
.DEFAULT_GOAL := render

# Re-installs when a requirement file changes.
$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

.venv-flwr-%/.installed: requirements-flwr.txt
	$(PYTHON) -m venv .venv-flwr-$*
	.venv-flwr-$*/bin/python -m pip install --quiet --disable-pip-version-check flwr==$*
	touch $@

render: $(VENV)/.installed
	@$(PY) -m federation render --stack $(STACK)

validate: $(VENV)/.installed
	@$(PY) -m federation validate --stack $(STACK)

schema: $(VENV)/.installed
	@$(PY) -m federation schema

test: $(VENV)/.installed $(FLWR_VENVS)
	$(PY) -m pytest

clean:
	rm -rf $(VENV) .venv-flwr-* .pytest_cache .hypothesis
