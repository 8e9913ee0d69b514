"""events/db/sql/book.sql is the source of the booking's functions: what the database holds
(installed by the migrations) must be exactly what the file says, so an edit of the file without
a migration carrying it fails here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.db import connection

import events

BOOK_SQL = Path(events.__file__).parent / "db" / "sql" / "book.sql"

_FUNCTION = re.compile(
    r"CREATE OR REPLACE FUNCTION (?P<name>\w+)\((?P<args>[^)]*)\).*?AS \$\$(?P<body>.*?)\$\$;",
    re.DOTALL,
)


def functions_in(text: str) -> dict[str, str]:
    """{name: body} of every function the SQL text creates."""
    return {m["name"]: m["body"] for m in _FUNCTION.finditer(text)}


def test_the_file_creates_the_booking_functions():
    assert set(functions_in(BOOK_SQL.read_text())) == {"events_booking_inputs", "events_book"}


@pytest.mark.django_db
def test_the_database_holds_the_functions_as_the_file_writes_them():
    with connection.cursor() as cursor:
        for name, body in functions_in(BOOK_SQL.read_text()).items():
            cursor.execute(
                "SELECT prosrc FROM pg_proc WHERE proname = %s AND pronamespace = "
                "'public'::regnamespace",
                [name],
            )
            held = [row[0] for row in cursor.fetchall()]
            assert held == [body], f"{name}: the database holds another version (a migration?)"


def test_an_edit_without_its_migration_is_told_apart():
    """The comparison's own control: a body changed by one character is another body."""
    text = BOOK_SQL.read_text()
    edited = text.replace("registration_ids := v_ids;", "registration_ids := v_ids ;")
    assert edited != text
    assert functions_in(edited)["events_book"] != functions_in(text)["events_book"]
