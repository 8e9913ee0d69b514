"""The one-statement booking: what a booking decides on, as one document, and its lock.

- `events_booking_inputs(event, ticket)` (STABLE; a set-returning SQL function, so that
  PostgreSQL inlines it into the query calling it and plans it with that query, once per
  prepared statement — a scalar SQL function's body would be planned at every call, which
  cost more than running it): everything a booking decides on, as one
  JSON array — the event row, its stage's pipe_end, whether it has tickets, the ticket row
  (NULL when none is asked for or it is gone), the active questions with their choice ids, and
  the after_sub schedulers' deciding columns (id, interval_nbr, interval_unit, created_at,
  include_existing; not the counters the pass updates). No row when the event does not
  exist.
  `locks.booking_inputs` reads it with its md5, the digest.
- `events_booking_lock(event, ticket, digest, count)` (VOLATILE): takes the Event row lock,
  then — each later query of a volatile function sees what was committed until then — compares
  the md5 of the inputs as committed now with the digest the booking decided on, and raises
  (SQLSTATE P0001, message `events_booking_stale`) when they differ or the event is gone;
  otherwise it draws `count` registration ids, under the lock, and returns them (ascending).
  Its only caller is the booking statement's first CTE (registrations.register).
"""

from django.db import migrations

CREATE = """
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

CREATE OR REPLACE FUNCTION events_booking_lock(
    p_event bigint, p_ticket bigint, p_digest text, p_count integer
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
    RETURN ARRAY(SELECT nextval('events_registration_id_seq'::regclass) AS id
                   FROM generate_series(1, p_count) ORDER BY id);
END
$$;
"""

DROP = """
DROP FUNCTION IF EXISTS events_booking_lock(bigint, bigint, text, integer);
DROP FUNCTION IF EXISTS events_booking_inputs(bigint, bigint);
"""


class Migration(migrations.Migration):
    dependencies = [("events", "0012_rows_guard")]

    operations = [migrations.RunSQL(CREATE, DROP)]
