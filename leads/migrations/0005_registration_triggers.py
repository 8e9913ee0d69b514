"""The lead requests follow the registrations from the database: two statement-level triggers
on events_registration call `leads_cover_request` (migration 0004) in the transaction that
wrote the registrations, whoever wrote them (the booking's `events_book`, a transition, a
bulk write).

- `leads_registrations_added` (AFTER INSERT): per event of the new rows, in ascending event
  order (the lock order of request rows), the request is made to cover every rule from below
  the event's lowest new registration;
- `leads_registrations_moved` (AFTER UPDATE): the same for the rows whose state changed (an
  UPDATE that changes no state, a contact edit, writes nothing).

The request rows are always locked after the Event rows: the verbs that write registrations
hold their Event rows (FOR UPDATE) already, and the triggers take FOR KEY SHARE on them, in
ascending order, before touching a request, for any other writer. When a trigger wrote a request, it adds
`leads` to the transaction's `events.after_commit` (events.hooks), and the Python hook nudges
the pass after commit (leads.services.requests.registrations_changed); a request that already
covered the rows, left unwritten, asks for nothing (its pass is already due).
"""

from django.db import migrations

CREATE = """
-- Cover every event from below its lowest registration concerned (arrays in ascending event
-- order: the lock order of request rows); when a request was written, ask the writer to nudge
-- the lead pass after commit (events.hooks: the transaction-local `events.after_commit` names
-- the overlays to tell). count() runs the upsert for every event: none may be skipped.
CREATE OR REPLACE FUNCTION leads_cover_lowest(p_events bigint[], p_lowest bigint[])
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE written bigint;
BEGIN
    -- The lock order of every writer of requests: the Event rows first. A writer holding them
    -- (FOR UPDATE: the booking, a transition) already has this; one that does not (a bulk
    -- write) waits here for a booking of the event instead of meeting it in a deadlock at
    -- COMMIT (leads/services/requests.py, hold_events).
    PERFORM 1 FROM events_event WHERE id = ANY (p_events) ORDER BY id FOR KEY SHARE;
    SELECT count(leads_cover_request(x.event_id, x.lowest - 1)) INTO written
      FROM unnest(p_events, p_lowest) AS x (event_id, lowest);
    IF written > 0 THEN
        PERFORM set_config(
            'events.after_commit',
            concat_ws(',', NULLIF(current_setting('events.after_commit', true), ''), 'leads'),
            true);
    END IF;
END
$$;

CREATE OR REPLACE FUNCTION leads_registrations_added() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM leads_cover_lowest(array_agg(event_id ORDER BY event_id),
                               array_agg(lowest ORDER BY event_id))
       FROM (SELECT event_id, min(id) AS lowest FROM leads_added GROUP BY event_id) AS a
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION leads_registrations_moved() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM leads_cover_lowest(array_agg(event_id ORDER BY event_id),
                               array_agg(lowest ORDER BY event_id))
       FROM (SELECT n.event_id, min(n.id) AS lowest
               FROM leads_new AS n JOIN leads_old AS o ON o.id = n.id
              WHERE n.state IS DISTINCT FROM o.state
              GROUP BY n.event_id) AS a
    HAVING count(*) > 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER leads_registrations_added AFTER INSERT ON events_registration
    REFERENCING NEW TABLE AS leads_added
    FOR EACH STATEMENT EXECUTE FUNCTION leads_registrations_added();
CREATE TRIGGER leads_registrations_moved AFTER UPDATE ON events_registration
    REFERENCING OLD TABLE AS leads_old NEW TABLE AS leads_new
    FOR EACH STATEMENT EXECUTE FUNCTION leads_registrations_moved();
"""

DROP = """
DROP TRIGGER IF EXISTS leads_registrations_moved ON events_registration;
DROP TRIGGER IF EXISTS leads_registrations_added ON events_registration;
DROP FUNCTION IF EXISTS leads_registrations_moved();
DROP FUNCTION IF EXISTS leads_registrations_added();
DROP FUNCTION IF EXISTS leads_cover_lowest(bigint[], bigint[]);
"""


class Migration(migrations.Migration):
    dependencies = [("leads", "0004_cover_request")]

    operations = [migrations.RunSQL(CREATE, DROP)]
