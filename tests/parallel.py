"""Parallel runs (pytest-xdist) on one machine (test infrastructure, loaded by pyproject's
addopts as `-p tests.parallel`, so it runs before Django's settings are read).

Each xdist worker gets what two workers must not share:
- the test database: pytest-django's own (`test_<name>_gw0`, `test_<name>_gw1`, …);
- the Redis databases of the Celery broker and the cache: worker gwK uses the configured
  database numbers plus 2·(K+1) (CELERY_BROKER_URL …/0 and CACHE_URL …/1 give gw0 2 and 3,
  gw1 4 and 5), set in the environment before the settings read it, so the subprocesses the
  tests start (Celery workers, gunicorn, beat) inherit them; the broker and the cache must be
  two consecutive numbers (n, n+1) and the shifted numbers must exist on the Redis server
  (16 databases by default);
- its ports: `free_port()` hands out ports of a band of its own, below Linux's ephemeral
  range (so neither another worker nor a client socket of the kernel's choosing can take a
  port between the test picking it and its server binding it).

What the workers share is scheduled (`--dist loadgroup --no-loadscope-reorder`, see
`pytest_collection_modifyitems` below): each test module is one work unit (its module-scoped
fixtures are built once), except the modules that open tens of PostgreSQL connections at once,
which form one unit, so no two of them run at the same time (PostgreSQL's 100 connections);
the units that take longest are handed out first, so no long module starts last.

Tests that cannot share the machine at all carry the `serial` marker; scripts/test.sh runs them
after the parallel run, alone.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
from pathlib import Path

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "" outside xdist, else "gw0", "gw1", …
_match = re.fullmatch(r"gw(\d+)", WORKER)
INDEX = int(_match.group(1)) if _match else None

# Port bands: [PORT_BASE + slot·PORT_BAND, + PORT_BAND); slot 0 for a run without xdist, K+1 for
# worker gwK. Below 32768, where Linux's ephemeral range (ip_local_port_range) starts.
PORT_BASE = 20000
PORT_BAND = 500


def _redis_shifted(url: str, by: int) -> str:
    """`url` with its database number (the path, 0 when absent) increased by `by`."""
    match = re.fullmatch(r"(?P<head>[a-z]+://[^/]*)(?:/(?P<db>\d*))?(?P<tail>\?.*)?", url)
    if match is None:
        raise ValueError(f"not a Redis URL with a database number: {url!r}")
    db = int(match.group("db") or 0) + by
    return f"{match.group('head')}/{db}{match.group('tail') or ''}"


def worker_environment(environ: dict[str, str], index: int | None) -> dict[str, str]:
    """The variables worker `index` (None: no xdist) overrides in `environ`."""
    if index is None:
        return {}
    shift = 2 * (index + 1)
    return {
        key: _redis_shifted(environ[key], shift)
        for key in ("CELERY_BROKER_URL", "CACHE_URL")
        if environ.get(key)
    }


def _env_file_values() -> dict[str, str]:
    """CELERY_BROKER_URL and CACHE_URL from the .env settings would read, when the environment
    lacks them (settings read .env without overriding the environment)."""
    root = Path(__file__).resolve().parents[1]
    path = Path(os.environ.get("DJANGO_ENV_FILE", str(root / ".env")))
    values: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and key in ("CELERY_BROKER_URL", "CACHE_URL"):
                values[key] = value.strip().strip("'\"")
    return values


# The broker and cache URLs as configured (environment over .env), before any shift.
CONFIGURED = {**_env_file_values(), **os.environ}
os.environ.update(worker_environment(CONFIGURED, INDEX))


_slot = 0 if INDEX is None else INDEX + 1
_ports = itertools.cycle(range(PORT_BASE + _slot * PORT_BAND, PORT_BASE + (_slot + 1) * PORT_BAND))


def free_port() -> int:
    """A port of this worker's band that nothing listens on now. Successive calls walk the band,
    so a port just handed out is not handed out again before the band wraps."""
    for _ in range(PORT_BAND):
        port = next(_ports)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use (a server of this run, or anything else on the machine)
            return port
    raise RuntimeError(f"no free port in this worker's band (slot {_slot})")


# Modules whose tests open tens of PostgreSQL connections at once (threads released by one
# barrier, several served processes): one work unit, so one of them runs at a time.
CONNECTION_HEAVY = (
    "tests/probes/test_seat_races.py",  # 50 threads
    "tests/probes/test_seam_exactly_once.py",  # 20 threads
    "tests/probes/test_sms_exactly_once.py",  # 20 registrations' passes in threads
    "tests/probes/test_waitlist_races.py",  # 15 threads and a Celery worker
    "tests/probes/test_many_machines.py",  # 3 web processes, 3 workers, 2 beats, client threads
    "tests/probes/test_database_faults.py",  # a served stack under client threads
)
CONNECTION_HEAVY_GROUP = "postgres-connections"
# Modules that take longest (tens of seconds: state machines, fuzzers, subprocesses), handed
# out first after the connection-heavy unit. A scheduling hint only: a module missing here
# runs all the same, later.
LONG = (
    "tests/events/config/test_make_run.py",  # `make run` itself: migrate, seed, three processes
    "tests/probes/test_model_checked.py",
    "tests/events/api_description/test_schemathesis.py",
    "tests/probes/test_killed_workers.py",
    "tests/probes/test_route_fuzz.py",
    "tests/events/config/test_config.py",
    "tests/probes/test_seam_fuzz.py",
    "tests/probes/test_ledger_property.py",
    "tests/events/config/test_config_secrets.py",
    "tests/events/waitlist/test_waitlist.py",
    "tests/events/intake/test_intake_properties.py",
    "tests/events/intake/test_intake_hardening.py",
    "tests/events/dashboard/test_exports.py",
    "tests/events/capability/test_capability.py",
    "tests/events/web/test_slow_clients.py",
    "tests/events/admin/test_admin_smoke.py",
    "tests/probes/test_seam_shrink.py",
    "tests/seams/test_webhooks_delivery.py",
)


def pytest_configure(config: pytest.Config) -> None:
    # xdist registers it too; a run without xdist (-p no:xdist) still sees these markers
    config.addinivalue_line("markers", "xdist_group(name): pytest-xdist's work unit (loadgroup)")


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The work units of `--dist loadgroup` (an xdist_group per module, one for the
    connection-heavy modules) and their order (the order of the items: connection-heavy unit,
    long modules, modules with a `slow` test, the rest as collected). Every worker collects
    the same items and sorts them the same way. Runs before xdist reads the groups; the order
    inside a module is kept."""
    slow = {_module(item) for item in items if item.get_closest_marker("slow")}

    def rank(module: str) -> tuple[int, int]:
        if module in CONNECTION_HEAVY:
            return (0, 0)
        if module in LONG:
            return (1, LONG.index(module))
        return (2, 0) if module in slow else (3, 0)

    first_seen: dict[str, int] = {}
    for item in items:
        module = _module(item)
        first_seen.setdefault(module, len(first_seen))
        group = CONNECTION_HEAVY_GROUP if module in CONNECTION_HEAVY else module
        item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=lambda item: (*rank(_module(item)), first_seen[_module(item)]))
    _write_serial_list(config, items)


SERIAL_LIST = Path(__file__).resolve().parents[1] / "test-output" / "serial-tests.txt"


def _write_serial_list(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `-m "not serial"`, the serial tests of this selection, one node id a line, for
    scripts/test.sh's serial run (which then collects only their modules). Written by the
    first worker (or the only process)."""
    if config.getoption("markexpr", "") != "not serial" or INDEX not in (None, 0):
        return
    serial = [item.nodeid for item in items if item.get_closest_marker("serial")]
    SERIAL_LIST.parent.mkdir(exist_ok=True)
    SERIAL_LIST.write_text("".join(f"{nodeid}\n" for nodeid in serial))
