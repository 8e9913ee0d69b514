"""Outbound webhook messages are written by the database, in the transaction of the change,
whoever made it: a statement-level trigger on the audit log (every change of the core writes
its audit rows in its own transaction, docs/spec.md "Audit") turns the rows of the verbs a
host can subscribe to into `seams_webhookmessage` rows, and fans each out into one
`seams_webhookdelivery` per endpoint that wants it.

- only when some endpoint wants the message: with no endpoint the trigger is one probe of an
  empty table; a message nobody subscribed to is never written;
- the payload is the state of what changed, read after the change's statement (the booking
  writes its registrations before their audit rows; a transition writes the row and its audit
  rows in one statement, whose AFTER triggers see both);
- `version` numbers the messages of a subject from 1 (the subject's row is locked by the writer
  of the change, so two writers number one after the other; the unique (subject, version)
  refuses anything else);
- an endpoint being deleted is skipped (`FOR KEY SHARE … SKIP LOCKED`): a change never waits
  for a delete nor fails on its foreign key;
- when it queued a delivery, the trigger adds `webhooks` to the transaction's
  `events.after_commit` (events.hooks), and the delivery task is nudged after commit.
"""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION seams_webhooks_enqueue() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE queued bigint;
BEGIN
    -- No endpoint, no message: the usual case costs one probe of an empty table.
    PERFORM 1 FROM seams_webhookendpoint LIMIT 1;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    WITH changes AS (
        SELECT a.id AS audit_id, a.at, a.data, a.registration_id,
               CASE WHEN a.verb = 'event.updated' THEN 'event.postponed' ELSE a.verb END
                   AS type,
               coalesce(a.event_id, (SELECT r.event_id FROM events_registration r
                                      WHERE r.id = a.registration_id)) AS event_id
          FROM seams_audit_added a
         WHERE a.verb IN ('registration.created', 'registration.cancelled',
                          'registration.attended', 'waitlist.offered', 'waitlist.expired',
                          'event.cancelled')
            OR (a.verb = 'event.updated' AND (a.data ? 'date_begin' OR a.data ? 'date_end'))
    ), wanted AS (
        SELECT c.*, split_part(c.type, '.', 1) AS noun,
               CASE split_part(c.type, '.', 1)
                   WHEN 'registration' THEN 'registration:' || c.registration_id
                   WHEN 'waitlist' THEN 'waitlist:' || (c.data ->> 'entry')
                   ELSE 'event:' || c.event_id
               END AS subject
          FROM changes c
         WHERE EXISTS (SELECT 1 FROM seams_webhookendpoint e
                        WHERE c.type = ANY (e.event_types)
                          AND (e.event_id IS NULL OR e.event_id = c.event_id))
    ), numbered AS (
        SELECT w.*,
               coalesce((SELECT max(m.version) FROM seams_webhookmessage m
                          WHERE m.subject = w.subject), 0)
               + row_number() OVER (PARTITION BY w.subject ORDER BY w.audit_id) AS version
          FROM wanted w
    ), described AS (
        -- `data`: the registration, the waiting-list entry or the event, as the host reads it
        -- (never the barcode); event.postponed adds the dates before the change (the audit
        -- row's [old, new]). Joined here, not read by a function per row: an SQL function's
        -- body is planned again on every call.
        SELECT n.*,
               CASE n.noun
               WHEN 'registration' THEN jsonb_build_object('registration', jsonb_build_object(
                   'id', r.id, 'event', r.event_id, 'ticket', r.ticket_id, 'slot', r.slot_id,
                   'state', r.state, 'name', r.name, 'email', r.email, 'phone', r.phone,
                   'company_name', r.company_name, 'partner_ref', r.partner_ref,
                   'sale_order_ref', r.sale_order_ref,
                   'sale_order_line_ref', r.sale_order_line_ref,
                   'sale_status', r.sale_status, 'is_paid', r.is_paid,
                   'cancel_source', r.cancel_source, 'created_at', r.created_at,
                   'updated_at', r.updated_at))
               WHEN 'waitlist' THEN jsonb_build_object('entry', jsonb_build_object(
                   'id', w.id, 'event', w.event_id, 'ticket', w.ticket_id, 'slot', w.slot_id,
                   'state', w.state, 'name', w.name, 'email', w.email,
                   'offered_at', w.offered_at, 'expires_at', w.expires_at,
                   'offer_version', w.offer_version, 'registration', w.registration_id))
               ELSE jsonb_build_object('event', jsonb_build_object(
                   'id', e.id, 'name', e.name, 'date_begin', e.date_begin,
                   'date_end', e.date_end, 'date_tz', e.date_tz,
                   'kanban_state', e.kanban_state, 'is_published', e.is_published,
                   'active', e.active))
                   || CASE WHEN n.type = 'event.postponed' THEN jsonb_build_object('previous',
                          jsonb_build_object(
                              'date_begin', coalesce(n.data -> 'date_begin' -> 0,
                                                     to_jsonb(e.date_begin)),
                              'date_end', coalesce(n.data -> 'date_end' -> 0,
                                                   to_jsonb(e.date_end))))
                      ELSE '{}'::jsonb END
               END AS body
          FROM numbered n
          LEFT JOIN events_registration r
                 ON n.noun = 'registration' AND r.id = n.registration_id
          LEFT JOIN events_waitlistentry w
                 ON n.noun = 'waitlist' AND w.id = (n.data ->> 'entry')::bigint
          LEFT JOIN events_event e ON n.noun = 'event' AND e.id = n.event_id
    ), messages AS (
        INSERT INTO seams_webhookmessage
               (msg_id, type, event_id, subject, version, audit_id, payload, created_at)
        SELECT 'msg_' || replace(gen_random_uuid()::text, '-', ''), d.type, d.event_id,
               d.subject, d.version, d.audit_id,
               jsonb_build_object(
                   'type', d.type,
                   'timestamp', d.at,
                   'data', coalesce(d.body, '{}'::jsonb)
                           || jsonb_build_object('subject', d.subject, 'version', d.version)),
               now()
          FROM described d
         ORDER BY d.audit_id
        RETURNING id, type, event_id, subject, version
    )
    INSERT INTO seams_webhookdelivery
           (message_id, endpoint_id, subject, version, state, attempts, next_attempt_at,
            last_status, last_error, delivered_at, created_at)
    SELECT m.id, e.id, m.subject, m.version, 'pending', 0, now(), NULL, '', NULL, now()
      FROM messages m
      JOIN seams_webhookendpoint e
        ON m.type = ANY (e.event_types) AND (e.event_id IS NULL OR e.event_id = m.event_id)
    -- An endpoint being deleted (locked FOR UPDATE) gets nothing, and the change never waits
    -- for the delete nor fails on its foreign key; staff's other verbs and the delivery run
    -- lock FOR NO KEY UPDATE, which KEY SHARE does not meet.
       FOR KEY SHARE OF e SKIP LOCKED;
    GET DIAGNOSTICS queued = ROW_COUNT;
    IF queued > 0 THEN
        PERFORM set_config(
            'events.after_commit',
            concat_ws(',', NULLIF(current_setting('events.after_commit', true), ''), 'webhooks'),
            true);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER seams_webhooks_audit_added
    AFTER INSERT ON events_eventauditlog
    REFERENCING NEW TABLE AS seams_audit_added
    FOR EACH STATEMENT EXECUTE FUNCTION seams_webhooks_enqueue();
"""

DROP = """
DROP TRIGGER IF EXISTS seams_webhooks_audit_added ON events_eventauditlog;
DROP FUNCTION IF EXISTS seams_webhooks_enqueue();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("seams", "0006_webhooks_outbound"),
        ("events", "0016_book_function"),
    ]

    operations = [migrations.RunSQL(CREATE, DROP)]
