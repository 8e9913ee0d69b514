"""`leads_cover_request(event, cursor)`: the registration hook's upsert of an event's lead
request as a function (leads.services.requests).

It makes the event's request cover every rule from below `cursor`: inserts it, or lowers its
cursor and drops its rule subset — leaving it unwritten when it already covers that (cursor
at or below, every rule, no walker holding it). Returns the request's id when it wrote it,
NULL otherwise. A VOLATILE function: each of its statements sees what was committed when it
starts. The booking runs it inside its one statement, after the Event row lock that the
statement waited for (registrations.register); as a plain CTE of that statement the upsert
and the subset's DELETE would see only what was committed before the lock wait (the snapshot
of the statement's start), and could miss a rule subset committed meanwhile.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION leads_cover_request(p_event bigint, p_cursor bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE written bigint;
BEGIN
    INSERT INTO leads_leadrequest AS r
           (event_id, cursor, lease_holder, fencing_token, error_message, created_at)
    VALUES (p_event, p_cursor, '', 0, '', now())
    ON CONFLICT (event_id) DO UPDATE SET cursor = LEAST(r.cursor, EXCLUDED.cursor)
     WHERE r.cursor > EXCLUDED.cursor
        OR r.lease_until IS NOT NULL
        OR EXISTS (SELECT 1 FROM leads_leadrequest_rules s WHERE s.leadrequest_id = r.id)
    RETURNING r.id INTO written;
    IF written IS NOT NULL THEN
        DELETE FROM leads_leadrequest_rules WHERE leadrequest_id = written;
    END IF;
    RETURN written;
END
$$;
"""

DROP = "DROP FUNCTION IF EXISTS leads_cover_request(bigint, bigint);"


class Migration(migrations.Migration):
    dependencies = [("leads", "0003_verbose_names"), ("events", "0013_booking_lock")]

    operations = [migrations.RunSQL(CREATE, DROP)]
