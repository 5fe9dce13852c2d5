# The two commands a reader needs: `make serve` and `make test`. Each sets up what is missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
# Material 9.8 prints a banner about MkDocs 2.0 on every run; it changes nothing here.
export NO_MKDOCS_2_WARNING := 1
export DISABLE_MKDOCS_2_WARNING := true

.PHONY: setup build serve dev lint format test bench chromium clean

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "Python 3.11 or newer is needed (found: $$($(PYTHON) --version))"; exit 1; }
	$(PYTHON) -m venv $(VENV) || { echo "Cannot create a virtual environment: on Debian, apt-get install python3-venv"; exit 1; }
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $@

node_modules/.installed: package.json package-lock.json
	@command -v npm >/dev/null || { echo "Node.js 20 or newer with npm is needed"; exit 1; }
	npm ci --no-audit --no-fund
	touch $@

setup: $(VENV)/.installed node_modules/.installed

build: setup
	$(PY) -m mkdocs build --strict

# Serves the built site exactly as a static host would (what readers get).
serve: build
	@echo "Serving site/ at http://127.0.0.1:$(PORT)/ (Ctrl-C to stop)"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory site

# Live-reloading preview for writing.
dev: setup
	$(PY) -m mkdocs serve --dev-addr 127.0.0.1:$(PORT)

# Debian's Chromium: the test suite never downloads a browser of its own.
chromium:
	@if command -v chromium >/dev/null; then exit 0; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core fonts-liberation; \
	else echo "Chromium is missing: run 'sudo apt-get install chromium fonts-dejavu-core fonts-liberation'"; exit 1; fi

# ruff (lint and format, config in pyproject.toml) and ESLint (eslint.config.mjs); `make format` fixes.
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	npm run --silent lint

format: setup
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

test: setup chromium lint build
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup chromium build
	$(PY) tests/bench.py

clean:
	rm -rf site build .pytest_cache
