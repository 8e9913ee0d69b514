#!/usr/bin/env bash
# Every gate of spec.md §13, in order; the first failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# pytest-xdist workers of the parallel run (2 cores: 2); each worker has its own test database,
# Redis databases and ports (tests/parallel.py).
WORKERS="${TEST_WORKERS:-2}"
$PY scripts/write_env.py >/dev/null

# The wall time of every phase, printed at the end (also when a phase fails).
now_ms() { echo $(($(date +%s%N) / 1000000)); }
seconds() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
phases=()
started=$(now_ms)
phase_started=$started
phase_name=""
phase() {
  local now
  now=$(now_ms)
  if [ -n "$phase_name" ]; then
    phases+=("$(printf '%7s s  %s' "$(seconds $((now - phase_started)))" "$phase_name")")
  fi
  phase_name="$1"
  phase_started=$now
  if [ -n "$1" ]; then echo "== $1"; fi
}
report() {
  local status=$?
  phase ""
  echo "== wall time per phase"
  printf '%s\n' "${phases[@]}"
  printf '%7s s  total\n' "$(seconds $(($(now_ms) - started)))"
  exit $status
}
trap report EXIT

# pytest, where "no test selected" (exit 5: arguments that leave one of the two runs empty)
# is not a failure.
run_pytest() {
  local status=0
  $PY -m pytest "$@" || status=$?
  if [ "$status" -ne 0 ] && [ "$status" -ne 5 ]; then return "$status"; fi
}

phase "ruff"
.venv/bin/ruff check .
.venv/bin/ruff format --check .

phase "mypy (django-stubs) on the verbs, the database machinery and the read models (config: pyproject.toml)"
services=()
for dir in events/services events/db events/read booths/services leads/services seams/services sms/services desk/services; do
  if [ -d "$dir" ]; then services+=("$dir"); fi
done
.venv/bin/mypy "${services[@]}"

phase "fonts for the PDF tickets and badges (Debian's; the system check events.E005 needs them)"
bash scripts/fonts.sh

phase "migrations match the models"
$PY manage.py makemigrations --check --dry-run

phase "deploy checks on production settings"
DJANGO_SETTINGS_MODULE=config.settings_production $PY manage.py check --deploy --fail-level WARNING

phase "the translation catalogs, compiled (GNU gettext's msgfmt; the .mo files are never committed)"
if ! command -v msgfmt >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gettext) >/dev/null
fi
$PY manage.py compilemessages --ignore=.venv -v0

phase "chromium for the real-browser tests (Debian's; Playwright drives it)"
if ! command -v chromium >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
fi

mkdir -p test-output
rm -f test-output/junit-*.xml test-output/serial-tests.txt
# Each worker on its own fresh test database (test_<name>_gw0, _gw1, …), kept for the serial run.
# loadgroup without reordering: the work units and their order are tests/parallel.py's.
phase "pytest, parallel: everything but the serial tests ($WORKERS workers, real PostgreSQL and Redis)"
run_pytest --create-db --reuse-db -q -m "not serial" -n "$WORKERS" \
  --dist loadgroup --no-loadscope-reorder --junitxml=test-output/junit-parallel.xml "$@"

# The serial tests of that selection (listed by tests/parallel.py), alone, on the first
# worker's database (migrated, and emptied by its tests); the options of "$@" apply, its paths
# were the selection.
phase "pytest, serial: the tests that cannot share the machine (marker serial), alone"
serial=()
if [ -f test-output/serial-tests.txt ]; then mapfile -t serial <test-output/serial-tests.txt; fi
options=()
for arg in "$@"; do
  if [ ! -e "${arg%%::*}" ]; then options+=("$arg"); fi
done
if [ "${#serial[@]}" -gt 0 ]; then
  TEST_DB_SUFFIX=gw0 run_pytest --reuse-db -q -m serial \
    --junitxml=test-output/junit-serial.xml "${options[@]}" "${serial[@]}"
fi
phase ""
echo "== the 15 slowest tests (setup + call + teardown, both runs)"
$PY - <<'PY'
import glob
import xml.etree.ElementTree as ET

cases = [
    # xdist's loadgroup appends "@<group>" to the test's name
    (float(case.get("time") or 0), f"{case.get('classname')}::{case.get('name').split('@')[0]}")
    for path in glob.glob("test-output/junit-*.xml")
    for case in ET.parse(path).iter("testcase")
]
for seconds, name in sorted(cases, reverse=True)[:15]:
    print(f"{seconds:7.1f} s  {name}")
PY
