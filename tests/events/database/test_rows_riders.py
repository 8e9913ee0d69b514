"""Riders (events.db.rows.Rider): another module's statements travelling inside one
statement, whose answer carries the rows each rider's counted CTE returned."""

from __future__ import annotations

import pytest
from django.db import connection

from events.db import rows


@pytest.fixture
def scratch(db):
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE rider_host (v int)")
        cursor.execute("CREATE TEMP TABLE rider_side (k int PRIMARY KEY, n int)")
    return None


def side_rider(name: str, key: int, n: int) -> rows.Rider:
    return rows.Rider(
        ctes=f"""{name} AS (
            INSERT INTO rider_side (k, n) VALUES (%s, %s)
            ON CONFLICT (k) DO UPDATE SET n = EXCLUDED.n WHERE rider_side.n <> EXCLUDED.n
            RETURNING k)""",  # noqa: S608 — a test's constant name
        params=[key, n],
        counted=name,
    )


def run(statement: rows.Statement) -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(*statement)
        return cursor.fetchone()


def table(name: str) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {name} ORDER BY 1")  # noqa: S608 — a test's constant
        return cursor.fetchall()


def test_riders_after_plain_inserts_answer_their_counts_alone(scratch):
    riders = [side_rider("ra", 1, 10), side_rider("rb", 2, 20)]
    answer = run(
        rows.combined(
            [
                ("INSERT INTO rider_host (v) VALUES (%s)", [7]),
                ("INSERT INTO rider_host (v) VALUES (%s)", [8]),
            ],
            riders,
        )
    )
    rows.read_riders(answer, riders)
    assert [r.answer for r in riders] == [1, 1]
    assert table("rider_host") == [(7,), (8,)]
    assert table("rider_side") == [(1, 10), (2, 20)]

    # written again with the same values: the upsert's WHERE is false, nothing is returned
    again = [side_rider("ra", 1, 10), side_rider("rb", 2, 21)]
    rows.read_riders(
        run(rows.combined([("INSERT INTO rider_host (v) VALUES (%s)", [9])], again)), again
    )
    assert [r.answer for r in again] == [0, 1]
    assert table("rider_side") == [(1, 10), (2, 21)]


def test_a_host_query_with_ctes_of_its_own_selects_the_counts_last(scratch):
    """The shape of the booking's write statement: inserts, riders, then a query with its own
    CTE (the seat ledger) whose select list ends with the riders' columns; parameters in
    textual order."""
    riders = [side_rider("rc", 3, 30)]
    columns = rows.rider_columns(riders)
    host = (f"WITH d AS (SELECT %s::int * 2 AS d) SELECT d, %s::text{columns} FROM d", [21, "tail"])  # noqa: S608
    answer = run(rows.combined([("INSERT INTO rider_host (v) VALUES (%s)", [5]), host], riders))
    rows.read_riders(answer, riders)
    assert answer[:2] == (42, "tail")
    assert riders[0].answer == 1
    assert table("rider_host") == [(5,)]
    assert table("rider_side") == [(3, 30)]


def test_without_riders_the_statement_is_unchanged():
    insert = ("INSERT INTO rider_host (v) VALUES (%s)", [1])
    assert rows.combined([insert]) == insert
    assert rows.combined([insert, insert])[0].startswith("WITH w0 AS (INSERT")


def test_a_rider_counts_a_cte_by_its_name_only():
    with pytest.raises(ValueError, match="by its name"):
        rows.Rider(ctes="x AS (SELECT 1)", params=[], counted="x) FROM y; --")


def test_a_host_whose_with_is_followed_by_a_newline_is_spliced_too(scratch):
    riders = [side_rider("rd", 4, 40)]
    columns = rows.rider_columns(riders)
    host = (f"WITH\n  d AS (SELECT %s::int AS d)\nSELECT d{columns} FROM d", [6])  # noqa: S608
    answer = run(rows.combined([("INSERT INTO rider_host (v) VALUES (%s)", [1]), host], riders))
    rows.read_riders(answer, riders)
    assert answer[0] == 6
    assert riders[0].answer == 1


def test_riders_alone_answer_their_counts(scratch):
    riders = [side_rider("re", 5, 50)]
    rows.read_riders(run(rows.combined([], riders)), riders)
    assert riders[0].answer == 1
    assert table("rider_side") == [(5, 50)]


def test_a_recursive_host_is_refused():
    with pytest.raises(ValueError, match="RECURSIVE"):
        rows.combined(
            [
                ("INSERT INTO rider_host (v) VALUES (1)", []),
                ("WITH RECURSIVE r AS (SELECT 1) SELECT 1", []),
            ]
        )
