"""`events_lock_as_seen(event, event_version, registration, registration_version,
share_event)`: the locks of a transition decided on rows read without a lock, and the check
that they are still the versions read (events.services.registrations.transitions, `seen`), as
one statement where they were three.

It locks the Event row (FOR SHARE when `share_event`: a transition that takes no new seat),
then the registration's (FOR UPDATE): the core's lock order. Then, each row read again once
locked (a VOLATILE function's statements each see what was committed when they start), it
fails the transaction through `events_rows_guard` (migration 0012) with the detail
`rows_as_seen: …` unless both are still the versions given: `xmin::text || ' ' || ctid::text`,
the text `transitions.row_version` reads.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION events_lock_as_seen(
    p_event bigint, p_event_version text,
    p_registration bigint, p_registration_version text,
    p_share_event boolean)
RETURNS integer
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    IF p_share_event THEN
        PERFORM 1 FROM events_event e WHERE e.id = p_event FOR SHARE OF e;
    ELSE
        PERFORM 1 FROM events_event e WHERE e.id = p_event FOR UPDATE OF e;
    END IF;
    PERFORM 1 FROM events_registration r WHERE r.id = p_registration FOR UPDATE OF r;
    RETURN events_rows_guard(
        (SELECT count(*) FROM events_event e, events_registration r
          WHERE e.id = p_event AND (e.xmin::text || ' ' || e.ctid::text) = p_event_version
            AND r.id = p_registration
            AND (r.xmin::text || ' ' || r.ctid::text) = p_registration_version),
        1, 'rows_as_seen');
END
$$;
"""

DROP = """
DROP FUNCTION IF EXISTS events_lock_as_seen(bigint, text, bigint, text, boolean);
"""


class Migration(migrations.Migration):
    dependencies = [("events", "0019_staff_sessions")]

    operations = [migrations.RunSQL(CREATE, DROP)]
