"""The rows guard: a statement that must change a known number of rows says so itself.

`events_rows_guard(changed, expected, what)` raises (SQLSTATE P0001, message
`events_rows_missing`, detail naming `what`) when a statement's data-modifying CTE changed
another number of rows than `expected`. A check made by the statement can have a COMMIT queued
right behind it in the same round trip (a transition's writes, registrations.transitions._transition): the
server skips that COMMIT when the check fails, where a check made by the client after reading
the answer would come after the COMMIT ran.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION events_rows_guard(changed bigint, expected integer, what text)
RETURNS integer
LANGUAGE plpgsql AS $$
BEGIN
    IF changed IS DISTINCT FROM expected THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_rows_missing',
            DETAIL = format('%s: %s of %s rows changed', what, changed, expected);
    END IF;
    RETURN 0;
END
$$;
"""

DROP = "DROP FUNCTION IF EXISTS events_rows_guard(bigint, integer, text);"


class Migration(migrations.Migration):
    dependencies = [("events", "0011_lean_registration_indexes")]

    operations = [migrations.RunSQL(CREATE, DROP)]
