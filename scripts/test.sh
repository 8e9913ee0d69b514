#!/usr/bin/env bash
# Every gate of spec.md §13, in order; the first failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
$PY scripts/write_env.py >/dev/null

echo "== ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

echo "== mypy (django-stubs) on the verbs, the database machinery and the read models (config: pyproject.toml)"
services=()
for dir in events/services events/db events/read booths/services leads/services seams/services sms/services desk/services; do
  if [ -d "$dir" ]; then services+=("$dir"); fi
done
.venv/bin/mypy "${services[@]}"

echo "== migrations match the models"
$PY manage.py makemigrations --check --dry-run

echo "== deploy checks on production settings"
DJANGO_SETTINGS_MODULE=config.settings_production $PY manage.py check --deploy --fail-level WARNING

echo "== chromium for the real-browser tests (Debian's; Playwright drives it)"
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi

echo "== pytest (real PostgreSQL and Redis)"
mkdir -p test-output
$PY -m pytest --create-db -q "$@"
