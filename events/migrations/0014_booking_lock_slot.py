"""The booking lock checks the booking's slot under the lock.

`events_booking_lock(event, ticket, slot, digest, count)` replaces the four-argument version
of migration 0013: after the Event row lock and the inputs' check, a slot given must still be
one of the event's (a slot is deleted under the same Event lock, events.delete_slot), else it
raises (SQLSTATE P0001, message `events_booking_no_slot`) before anything is written — so a
slot deleted since the caller read it is refused at the statement, in a caller's transaction
too, and before the seat guard (the foreign keys to it are only checked at COMMIT: Django
makes them DEFERRABLE INITIALLY DEFERRED).
"""

from importlib import import_module

from django.db import migrations

CREATE = """
DROP FUNCTION IF EXISTS events_booking_lock(bigint, bigint, text, integer);
CREATE OR REPLACE FUNCTION events_booking_lock(
    p_event bigint, p_ticket bigint, p_slot bigint, p_digest text, p_count integer
) RETURNS bigint[]
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM 1 FROM events_event WHERE id = p_event FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_booking_stale',
            DETAIL = format('event %s does not exist', p_event);
    END IF;
    IF (SELECT md5(i::text) FROM events_booking_inputs(p_event, p_ticket) AS i)
       IS DISTINCT FROM p_digest THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_booking_stale',
            DETAIL = format('event %s changed since it was read', p_event);
    END IF;
    IF p_slot IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM events_slot WHERE id = p_slot AND event_id = p_event
    ) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_booking_no_slot',
            DETAIL = format('slot %s is not one of event %s', p_slot, p_event);
    END IF;
    RETURN ARRAY(SELECT nextval('events_registration_id_seq'::regclass) AS id
                   FROM generate_series(1, p_count) ORDER BY id);
END
$$;
"""

# Back to migration 0013's functions (its CREATE OR REPLACE of both).
DROP = (
    "DROP FUNCTION IF EXISTS events_booking_lock(bigint, bigint, bigint, text, integer);\n"
    + import_module("events.migrations.0013_booking_lock").CREATE
)


class Migration(migrations.Migration):
    dependencies = [("events", "0013_booking_lock")]

    operations = [migrations.RunSQL(CREATE, DROP)]
