"""The booking as one function call: `events_book(booking)` (events/db/sql/book.sql, whose
header says what it does) replaces `events_booking_lock` and the one-statement booking built by
the client around it. `events_booking_inputs` is created again from the same file (unchanged).

The functions' text below is a copy of events/db/sql/book.sql as of this migration;
tests/events/database/test_booking_sql.py compares the file with what the database holds.
"""

from importlib import import_module

from django.db import migrations

DROP_LOCK = "DROP FUNCTION IF EXISTS events_booking_lock(bigint, bigint, bigint, text, integer);"

FUNCTIONS = r"""
CREATE OR REPLACE FUNCTION events_booking_inputs(p_event bigint, p_ticket bigint)
RETURNS SETOF jsonb
LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_array(
               to_jsonb(e),
               s.pipe_end,
               EXISTS (SELECT 1 FROM events_ticket x WHERE x.event_id = e.id),
               (SELECT to_jsonb(t) FROM events_ticket t WHERE t.id = p_ticket),
               (SELECT jsonb_agg(to_jsonb(q) || jsonb_build_object('choice_ids',
                          ARRAY(SELECT c.id FROM events_questionchoice c
                                 WHERE c.question_id = q.id ORDER BY c.id))
                          ORDER BY q.sequence, q.id)
                  FROM events_question q WHERE q.event_id = e.id AND q.active),
               (SELECT jsonb_agg(jsonb_build_object(
                           'id', m.id, 'interval_nbr', m.interval_nbr,
                           'interval_unit', m.interval_unit, 'created_at', m.created_at,
                           'include_existing', m.include_existing) ORDER BY m.id)
                  FROM events_mail m
                 WHERE m.event_id = e.id AND m.interval_type = 'after_sub'))
      FROM events_event e JOIN events_stage s ON s.id = e.stage_id
     WHERE e.id = p_event
$$;

CREATE OR REPLACE FUNCTION events_book(
    p_booking jsonb, OUT registration_ids bigint[], OUT after_commit text
)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_event bigint := (p_booking->>'event')::bigint;
    v_ticket bigint := (p_booking->>'ticket')::bigint;
    v_slot bigint := (p_booking->>'slot')::bigint;
    v_seats jsonb := p_booking->'seats';
    v_ids bigint[];
    v_guard integer;
    v_slots bigint[];
    v_tickets bigint[];
    v_taken integer[];
BEGIN
    PERFORM 1 FROM events_event WHERE id = v_event FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_booking_stale',
            DETAIL = format('event %s does not exist', v_event);
    END IF;
    IF (SELECT md5(i::text) FROM events_booking_inputs(v_event, v_ticket) AS i)
       IS DISTINCT FROM p_booking->>'digest' THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_booking_stale',
            DETAIL = format('event %s changed since it was read', v_event);
    END IF;
    IF v_slot IS NOT NULL AND NOT EXISTS (
        SELECT 1 FROM events_slot WHERE id = v_slot AND event_id = v_event
    ) THEN
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = 'events_booking_no_slot',
            DETAIL = format('slot %s is not one of event %s', v_slot, v_event);
    END IF;

    IF v_seats IS NOT NULL THEN
        IF (v_seats->>'create')::boolean THEN
            -- Taking seats: one upsert behind the (event, slot, ticket) key.
            WITH changed AS (
                INSERT INTO events_seatledger AS l
                       (event_id, slot_id, ticket_id, reserved, used, held)
                SELECT v_event, (c->>0)::bigint, (c->>1)::bigint, (c->>2)::int, (c->>3)::int,
                       (c->>4)::int
                  FROM jsonb_array_elements(v_seats->'changes') AS c
                    ON CONFLICT ON CONSTRAINT seat_ledger_key DO UPDATE
                   SET reserved = l.reserved + EXCLUDED.reserved,
                       used = l.used + EXCLUDED.used, held = l.held + EXCLUDED.held
             RETURNING l.slot_id, l.ticket_id, l.reserved + l.used + l.held AS taken
            )
            SELECT array_agg(slot_id), array_agg(ticket_id), array_agg(taken)
              INTO v_slots, v_tickets, v_taken FROM changed;
        ELSE
            -- Moving held seats: their rows exist. (PostgreSQL checks an INSERT's CHECK
            -- constraints before ON CONFLICT, so negative deltas take an UPDATE.)
            WITH changed AS (
                UPDATE events_seatledger AS l
                   SET reserved = l.reserved + v.r, used = l.used + v.u, held = l.held + v.h
                  FROM (SELECT (c->>0)::bigint, (c->>1)::bigint, (c->>2)::int, (c->>3)::int,
                               (c->>4)::int
                          FROM jsonb_array_elements(v_seats->'changes') AS c
                       ) AS v (s, t, r, u, h)
                 WHERE l.event_id = v_event
                   AND l.slot_id IS NOT DISTINCT FROM v.s
                   AND l.ticket_id IS NOT DISTINCT FROM v.t
             RETURNING l.slot_id, l.ticket_id, l.reserved + l.used + l.held AS taken
            )
            SELECT array_agg(slot_id), array_agg(ticket_id), array_agg(taken)
              INTO v_slots, v_tickets, v_taken FROM changed;
        END IF;
        -- Every limit against the counters the change produced; every row changed.
        SELECT events_seats_guard(
                   (v_seats->>'requested')::int,
                   max(changed.taken - m.maximum)::int,
                   count(*),
                   jsonb_array_length(v_seats->'changes'))
          INTO v_guard
          FROM unnest(v_slots, v_tickets, v_taken) AS changed (slot_id, ticket_id, taken)
          LEFT JOIN (
                    SELECT (x->>0)::bigint, (x->>1)::bigint, (x->>2)::int
                      FROM jsonb_array_elements(v_seats->'limits') AS x
                ) AS m (s, t, maximum)
            ON changed.slot_id IS NOT DISTINCT FROM m.s
           AND changed.ticket_id IS NOT DISTINCT FROM m.t;
    END IF;

    -- The ids come from the identity column as the rows are inserted, in the document's order
    -- (so ascending in it), under the lock.
    WITH added AS (
        INSERT INTO events_registration OVERRIDING USER VALUE
        SELECT * FROM jsonb_populate_recordset(
            NULL::events_registration, p_booking->'registrations')
        RETURNING id
    )
    SELECT array_agg(id ORDER BY id) INTO v_ids FROM added;
    IF p_booking ? 'answers' THEN
        INSERT INTO events_registrationanswer OVERRIDING USER VALUE
        SELECT r.*
          FROM jsonb_array_elements(p_booking->'answers') AS x (o),
               LATERAL jsonb_populate_record(
                   NULL::events_registrationanswer,
                   x.o || jsonb_build_object(
                       'registration_id', v_ids[(x.o->>'registration_id')::int])) AS r;
    END IF;
    INSERT INTO events_eventauditlog OVERRIDING USER VALUE
    SELECT r.*
      FROM jsonb_array_elements(p_booking->'audit') AS x (o),
           LATERAL jsonb_populate_record(
               NULL::events_eventauditlog,
               x.o || jsonb_build_object(
                   'registration_id', v_ids[(x.o->>'registration_id')::int])) AS r;
    IF p_booking ? 'mails' THEN
        INSERT INTO events_mailregistration OVERRIDING USER VALUE
        SELECT r.*
          FROM jsonb_array_elements(p_booking->'mails') AS x (o),
               LATERAL jsonb_populate_record(
                   NULL::events_mailregistration,
                   x.o || jsonb_build_object(
                       'registration_id', v_ids[(x.o->>'registration_id')::int])) AS r;
    END IF;
    registration_ids := v_ids;
    -- What the triggers on these rows (the overlays') asked to be told after commit, taken:
    -- a later verb of the same transaction answers for its own writes only.
    after_commit := current_setting('events.after_commit', true);
    PERFORM set_config('events.after_commit', '', true);
END
$$;
"""

# Back to migration 0014's lock (and 0013's inputs, unchanged).
DROP = [
    "DROP FUNCTION IF EXISTS events_book(jsonb);",
    import_module("events.migrations.0014_booking_lock_slot").CREATE,
]


class Migration(migrations.Migration):
    dependencies = [("events", "0015_stage_cancelled_export_permission")]

    operations = [migrations.RunSQL([DROP_LOCK, FUNCTIONS], DROP)]
