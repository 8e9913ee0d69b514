"""Shared plumbing of the benchmarks (docs/benchmarks.md).

Every bench module `bench/b<N>_<name>.py` exposes `run(*, quick: bool = False) -> list[dict]`;
each dict is one table row:

    bench     "B1"…
    what      what was measured
    measured  the figure, as text
    target    the target, as text
    ok        True / False against the target, None when the row has no target
    checks    correctness checks of the run, as text ("oversell 0")
    checks_ok (optional, default True) False when a correctness check failed: `bench/run.py`
              then exits non-zero. Timing never fails a run.

Benchmarks use their own database, `backbone_events_bench` (or `$BENCH_DATABASE`) on the server of
DATABASE_URL:
`setup()` points DATABASE_URL at it before Django starts, creates it when missing and migrates
it by running `manage.py migrate` in a subprocess; `bench/run.py` first drops it
(`fresh_database`), so each run starts from an empty database.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
# BENCH_DATABASE names another database (a bench run beside another checkout's on one server).
BENCH_DB = os.environ.get("BENCH_DATABASE") or "backbone_events_bench"
COLUMNS = ("bench", "what", "measured", "target", "ok", "checks")

_ready = False


def _env_file_value(name: str) -> str | None:
    env_file = Path(os.environ.get("DJANGO_ENV_FILE", str(ROOT / ".env")))
    if not env_file.is_file():
        return None
    for line in env_file.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == name:
            return value.strip()
    return None


def bench_database_url() -> str:
    """DATABASE_URL (environment, else .env) with the database name replaced by BENCH_DB."""
    url = os.environ.get("DATABASE_URL") or _env_file_value("DATABASE_URL")
    if not url:
        raise SystemExit("bench: DATABASE_URL is not set (environment or .env)")
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{BENCH_DB}"))


def setup() -> None:
    """Create and migrate the bench database, then start Django on it (once per process)."""
    global _ready
    if _ready:
        return
    url = bench_database_url()
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    _create_database(url)
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "--no-input", "-v0"],
        check=True,
        cwd=ROOT,
        env=os.environ.copy(),
    )
    import django

    django.setup()
    _ready = True


def fresh_database() -> None:
    """Drop the bench database, so that `setup()` creates and migrates it anew: every
    `bench/run.py` run starts from the same empty state (`--reuse-db` skips this). Runs used to
    inherit every earlier run's rows, and PostgreSQL on these machines runs with autovacuum off:
    after a day of runs the registrations table carried 580,000 live and 350,000 dead rows
    (docs/benchmarks.md, "Machine"). A connection still open on it makes the DROP fail, named
    by PostgreSQL's own error."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(bench_database_url())
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(BENCH_DB)))


def _create_database(url: str) -> None:
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [BENCH_DB]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(BENCH_DB)))


def psycopg_url() -> str:
    """The bench database as a libpq URL (for benchmarks that talk to PostgreSQL directly)."""
    return bench_database_url().replace("postgres://", "postgresql://", 1)


# --- timing --------------------------------------------------------------------------------


@contextmanager
def stopwatch():
    """`with stopwatch() as t: …` then `t()` is the elapsed seconds."""
    start = time.perf_counter()
    end: list[float] = []
    yield lambda: (end[0] if end else time.perf_counter()) - start
    end.append(time.perf_counter())


def timed(fn: Callable[[], object], times: int) -> list[float]:
    """Seconds taken by each of `times` calls of fn."""
    out = []
    for _ in range(times):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def median_ms(samples: Iterable[float]) -> float:
    return statistics.median(samples) * 1000


def rate(count: int, seconds: float) -> float:
    return count / seconds if seconds > 0 else float("inf")


# --- results -------------------------------------------------------------------------------


def write_result(name: str, data: dict) -> Path:
    """bench/results/<name>.json with the data and when / where it was taken."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    payload = {
        "taken_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpus": os.cpu_count(),
        **data,
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


def checks(passed: str, problems: list[str]) -> str:
    """A row's checks cell: what passed, or the problems found (the first 200 characters)."""
    return passed if not problems else "FAILED: " + "; ".join(problems)[:200]


def _cell(row: dict, column: str) -> str:
    value = row.get(column)
    if column == "ok":
        return {True: "yes", False: "NO", None: "—"}[value]
    return "" if value is None else str(value)


def table(rows: list[dict]) -> str:
    """A Markdown table of the rows (the same text goes into docs/benchmarks.md)."""
    widths = {c: max([len(c)] + [len(_cell(r, c)) for r in rows]) for c in COLUMNS}
    line = "| " + " | ".join(c.ljust(widths[c]) for c in COLUMNS) + " |"
    rule = "|" + "|".join("-" * (widths[c] + 2) for c in COLUMNS) + "|"
    body = ["| " + " | ".join(_cell(r, c).ljust(widths[c]) for c in COLUMNS) + " |" for r in rows]
    return "\n".join([line, rule, *body])


def run_released(worker: Callable[[int], None], count: int, barrier: threading.Barrier) -> float:
    """Start `count` threads running worker(index); each waits on `barrier` (sized count + 1),
    which this call joins last, so the clock starts when all are released. Returns the
    seconds until every thread finished."""
    pool = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in pool:
        thread.start()
    barrier.wait()
    start = time.perf_counter()
    for thread in pool:
        thread.join()
    return time.perf_counter() - start
