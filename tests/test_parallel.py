"""tests/parallel.py: what each pytest-xdist worker gets of its own (Redis databases, ports)."""

from __future__ import annotations

import os
import socket

import pytest

from tests import parallel

CONFIGURED = {
    "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0",
    "CACHE_URL": "rediscache://127.0.0.1:6379/1",
    "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x",
}


def test_without_xdist_nothing_is_overridden():
    assert parallel.worker_environment(CONFIGURED, None) == {}


def test_each_worker_shifts_broker_and_cache_past_the_configured_pair_and_each_other():
    seen = {
        (CONFIGURED["CELERY_BROKER_URL"], CONFIGURED["CACHE_URL"]),
    }
    assert parallel.worker_environment(CONFIGURED, 0) == {
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/2",
        "CACHE_URL": "rediscache://127.0.0.1:6379/3",
    }
    assert parallel.worker_environment(CONFIGURED, 1) == {
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/4",
        "CACHE_URL": "rediscache://127.0.0.1:6379/5",
    }
    for index in range(6):
        env = parallel.worker_environment(CONFIGURED, index)
        pair = (env["CELERY_BROKER_URL"], env["CACHE_URL"])
        assert pair not in seen
        seen.add(pair)
    databases = [url.rsplit("/", 1)[1] for pair in seen for url in pair]
    assert len(databases) == len(set(databases)), databases  # no number used twice


@pytest.mark.parametrize(
    ("url", "shifted"),
    [
        ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379/2"),
        ("redis://127.0.0.1:6379/", "redis://127.0.0.1:6379/2"),
        ("redis://:pw@host:6380/7?timeout=1", "redis://:pw@host:6380/9?timeout=1"),
        ("rediscache://127.0.0.1:6379/1", "rediscache://127.0.0.1:6379/3"),
    ],
)
def test_the_database_number_is_shifted_whatever_the_url_carries(url, shifted):
    assert parallel._redis_shifted(url, 2) == shifted


def test_this_process_runs_on_its_workers_redis_databases():
    """The plugin ran before the settings: the settings read the shifted URLs."""
    from django.conf import settings

    expected = {
        key: parallel.CONFIGURED[key] for key in ("CELERY_BROKER_URL", "CACHE_URL")
    } | parallel.worker_environment(parallel.CONFIGURED, parallel.INDEX)
    assert settings.CELERY_BROKER_URL == expected["CELERY_BROKER_URL"]
    assert os.environ["CELERY_BROKER_URL"] == expected["CELERY_BROKER_URL"]  # for subprocesses
    assert os.environ["CACHE_URL"] == expected["CACHE_URL"]


def test_free_ports_come_from_this_workers_band_and_are_not_repeated():
    slot = 0 if parallel.INDEX is None else parallel.INDEX + 1
    band = range(
        parallel.PORT_BASE + slot * parallel.PORT_BAND,
        parallel.PORT_BASE + (slot + 1) * parallel.PORT_BAND,
    )
    ports = [parallel.free_port() for _ in range(20)]
    assert all(port in band for port in ports), ports
    assert len(set(ports)) == len(ports)
    with socket.socket() as s:  # a port handed out is free: a server can bind it
        s.bind(("127.0.0.1", ports[-1]))


def test_a_port_in_use_is_skipped():
    """A port of the band that a server holds is not handed out: the walk passes it once in
    PORT_BAND calls and skips it."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", parallel.free_port()))
        taken.listen()
        busy = taken.getsockname()[1]
        ports = [parallel.free_port() for _ in range(parallel.PORT_BAND)]
    assert busy not in ports


def test_every_module_the_schedule_names_exists():
    """A renamed module would silently lose its place in the schedule (and, for the
    connection-heavy ones, its protection from running beside another)."""
    root = parallel.Path(parallel.__file__).resolve().parents[1]
    missing = [m for m in (*parallel.CONNECTION_HEAVY, *parallel.LONG) if not (root / m).is_file()]
    assert missing == []


class _Item:
    def __init__(self, nodeid: str, *marks: str) -> None:
        self.nodeid = nodeid
        self.marks = set(marks)
        self.groups: list[str] = []

    def get_closest_marker(self, name: str):
        return name if name in self.marks else None

    def add_marker(self, mark) -> None:
        assert mark.name == "xdist_group"
        self.groups.append(mark.args[0])


class _Config:
    def getoption(self, name: str, default=None):
        return ""  # not the parallel run's selection: no serial list written


def test_units_are_modules_the_connection_heavy_ones_one_unit_and_the_long_ones_first():
    heavy_a, heavy_b = parallel.CONNECTION_HEAVY[:2]
    long = parallel.LONG[0]
    items = [
        _Item("tests/a/test_plain.py::test_one"),
        _Item("tests/a/test_plain.py::test_two"),
        _Item("tests/b/test_slow.py::test_one", "slow"),
        _Item(f"{long}::test_one"),
        _Item(f"{heavy_b}::test_one"),
        _Item(f"{heavy_a}::test_one"),
        _Item("tests/a/test_plain.py::test_three"),
    ]
    parallel.pytest_collection_modifyitems(_Config(), items)
    assert [item.nodeid for item in items] == [
        f"{heavy_b}::test_one",  # the connection-heavy unit, modules as collected
        f"{heavy_a}::test_one",
        f"{long}::test_one",
        "tests/b/test_slow.py::test_one",
        "tests/a/test_plain.py::test_one",  # a module's tests keep their order
        "tests/a/test_plain.py::test_two",
        "tests/a/test_plain.py::test_three",
    ]
    assert [item.groups for item in items] == [
        [parallel.CONNECTION_HEAVY_GROUP],
        [parallel.CONNECTION_HEAVY_GROUP],
        [long],
        ["tests/b/test_slow.py"],
        ["tests/a/test_plain.py"],
        ["tests/a/test_plain.py"],
        ["tests/a/test_plain.py"],
    ]
