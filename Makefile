# The two commands of the README, and the benchmarks.
SHELL := /bin/bash
PY := .venv/bin/python
PORT ?= 8000
export PORT

.PHONY: run test bench install install-test services env lint

# The machine's environment may set PYTHONDONTWRITEBYTECODE: then no process keeps what it
# compiled, and every one (each web and Celery worker, command, test worker and the suite's
# subprocesses) compiles the project and its libraries from source again, ~1 s of CPU per
# django.setup on 2 cores. The caches are gitignored.
unexport PYTHONDONTWRITEBYTECODE

# uv resolves and installs the packages (seconds, where pip took most of a minute of a fresh
# clone's `make test`) and compiles them (uv does not by default); pip only installs uv itself.
UV := .venv/bin/uv pip install --quiet --compile-bytecode --python .venv/bin/python

.venv/.installed: pyproject.toml
	python3 -m venv .venv
	.venv/bin/pip install --quiet uv==0.13.9
	$(UV) -e .
	touch $@

.venv/.installed-test: .venv/.installed pyproject.toml
	$(UV) -e '.[test]'
	touch $@

install: .venv/.installed

install-test: .venv/.installed-test

services:
	@bash scripts/services.sh

env: .venv/.installed
	@$(PY) scripts/write_env.py

run: install services env
	@bash scripts/fonts.sh
	@mkdir -p var
	@$(PY) scripts/createdb.py
	@$(PY) manage.py migrate --no-input -v0
	@$(PY) manage.py collectstatic --no-input -v0
	@$(PY) manage.py compilemessages --ignore=.venv -v0
	@$(PY) manage.py seed_demo
	@$(PY) manage.py bootstrap_admin
	@$(PY) manage.py check
	@echo "Serving on http://127.0.0.1:$(PORT)/  (admin: http://127.0.0.1:$(PORT)/admin/)"
	@exec .venv/bin/honcho start -f Procfile -e /dev/null  # settings read .env; the environment wins

lint: install-test
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .

test: install-test services
	@bash scripts/test.sh

bench: install-test services env
	@bash scripts/fonts.sh
	@$(PY) scripts/createdb.py
	@$(PY) manage.py migrate --no-input -v0
	@$(PY) manage.py compilemessages --ignore=.venv -v0
	@$(PY) bench/run.py
