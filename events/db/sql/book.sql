-- The booking's two functions (events.db.booking is their Python face).
--
-- This file is their source. The database holds what the migrations installed; a migration
-- that changes a function carries a copy of this file's text
-- (tests/events/database/test_booking_sql.py compares every function here with what the
-- database holds, so an edit here without its migration fails).
--
-- events_booking_inputs(event, ticket): everything a booking decides on, as one JSON array
--   (the event row, its stage's pipe_end, whether it has tickets, the ticket row or NULL, the
--   active questions with their choice ids, the after_sub schedulers' deciding columns). No
--   row when the event does not exist. STABLE and written in SQL, so PostgreSQL inlines it
--   into the query calling it. Its md5 is the inputs' digest.
--
-- events_book(booking): the locked work of one booking, in one call, with nothing decided
--   here that Python decides: the booking document carries the rows to write, built by
--   Python from the inputs it read. In order:
--   1. the Event row lock; then, each statement of a VOLATILE function seeing what was
--      committed once the lock was granted: the digest of the inputs as committed now must be
--      the one the booking decided on, else SQLSTATE P0001 `events_booking_stale`; a slot
--      given must be one of the event's, else `events_booking_no_slot`;
--   2. the seats: the ledger rows the booking changes, then every limit checked against the
--      counters that produced (`events_seats_guard`, migration 0010:
--      `events_seats_unavailable`). Taking new seats (`create`) is one upsert; moving seats
--      held for this booking (an accepted waiting-list offer) updates rows that must be there
--      (`events_seat_ledger_rows_missing` otherwise);
--   3. the registrations, their answers, audit rows and after_sub rows. Each row is a record
--      of its table (jsonb_populate_record[set]), so a column added to a model travels
--      without a change here; every id comes from its table's identity column (OVERRIDING
--      USER VALUE), the registrations' in the document's order, so ascending in it and drawn
--      under the lock; a follower row names its registration by its place in `registrations`
--      (from 1).
--   Returns the registration ids and `after_commit`: what the triggers on these rows asked to
--   be told once the transaction commits. An overlay's trigger that wrote something needing
--   after-commit work (a nudge) appends its name to the transaction-local setting
--   `events.after_commit` (comma-separated); the call takes them (the setting is emptied)
--   and the booking hands them to the overlays' `registrations_changed` hooks
--   (events.hooks). Any refusal raises: nothing is written.

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
