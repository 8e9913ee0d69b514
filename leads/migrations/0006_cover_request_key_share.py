"""`leads_cover_request(event, cursor)` leaves a request that already covers `cursor` under a
KEY SHARE lock instead of its upsert's lock (leads.services.requests).

The upsert locks the conflicting row even when its WHERE is false, and that lock
(FOR NO KEY UPDATE) is exclusive: every transaction that changed a registration of the event
(each of the desks' admissions) then waited for the one before it to commit, at the trigger.
What the lock must do is hold off a walker's claim (FOR UPDATE SKIP LOCKED) until the change
commits; FOR KEY SHARE does that too, and holders of it do not wait for one another. A request
that does not cover `cursor` (cursor above it, a walker's lease, a rule subset) is written by
the upsert as before: its NO KEY UPDATE lock does not conflict with KEY SHARE, so a transaction
that holds KEY SHARE never waits on another that holds it too (no deadlock from the upgrade).
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION leads_cover_request(p_event bigint, p_cursor bigint)
RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE written bigint;
BEGIN
    -- Covered, and held by no walker: nothing to write. A claim waiting on this row, or
    -- committed while this waited, makes the row fail the test when it is read again.
    PERFORM 1 FROM leads_leadrequest r
     WHERE r.event_id = p_event AND r.cursor <= p_cursor AND r.lease_until IS NULL
       AND NOT EXISTS (SELECT 1 FROM leads_leadrequest_rules s WHERE s.leadrequest_id = r.id)
       FOR KEY SHARE OF r;
    IF FOUND THEN
        RETURN NULL;
    END IF;
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


class Migration(migrations.Migration):
    dependencies = [("leads", "0005_registration_triggers")]

    operations = [
        migrations.RunSQL(
            CREATE,
            migrations.RunSQL.noop,  # the previous body is migration 0004's (re-run it to undo)
        )
    ]
