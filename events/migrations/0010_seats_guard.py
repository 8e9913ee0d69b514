"""The seat guard: the booking's limit check runs in the statement that takes the seats.

`events_seats_guard(requested, over, changed, expected)` raises (SQLSTATE P0001) when a limit is
exceeded — `over` seats above the tightest limit, of which at most `requested` are missing — or
when the ledger statement changed fewer rows than it should have. Its only caller is
events.services.seats (`send_reserve`): see its module docstring.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION events_seats_guard(
    requested integer, over integer, changed bigint, expected integer
) RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    IF changed <> expected THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_seat_ledger_rows_missing',
            DETAIL = format('%s of %s ledger rows changed', changed, expected);
    END IF;
    IF over > 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_seats_unavailable',
            DETAIL = LEAST(requested, over)::text;
    END IF;
    RETURN 0;
END
$$;
"""

DROP = "DROP FUNCTION IF EXISTS events_seats_guard(integer, integer, bigint, integer);"


class Migration(migrations.Migration):
    dependencies = [("events", "0009_waitlist")]

    operations = [migrations.RunSQL(CREATE, DROP)]
