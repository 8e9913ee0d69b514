"""Guards PostgreSQL enforces on rows that history points at (spec.md §2.5, §2.7).

- the type (or owner) of a question with answers cannot change;
- the owner of a ticket with registrations cannot change.
Deletion of such rows is already refused by the PROTECT foreign keys.
"""

from django.db import migrations

GUARDS = """
CREATE FUNCTION events_question_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.question_type IS DISTINCT FROM OLD.question_type
        OR NEW.event_id IS DISTINCT FROM OLD.event_id
        OR NEW.event_type_id IS DISTINCT FROM OLD.event_type_id)
       AND EXISTS (SELECT 1 FROM events_registrationanswer a WHERE a.question_id = OLD.id) THEN
        RAISE EXCEPTION 'question % has answers: its type and owner cannot change', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'question_answered_guard';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER events_question_guard
    BEFORE UPDATE OF question_type, event_id, event_type_id ON events_question
    FOR EACH ROW EXECUTE FUNCTION events_question_guard();

CREATE FUNCTION events_ticket_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.event_id IS DISTINCT FROM OLD.event_id
        OR NEW.event_type_id IS DISTINCT FROM OLD.event_type_id)
       AND EXISTS (SELECT 1 FROM events_registration r WHERE r.ticket_id = OLD.id) THEN
        RAISE EXCEPTION 'ticket % has registrations: its event cannot change', OLD.id
            USING ERRCODE = 'check_violation', CONSTRAINT = 'ticket_registered_guard';
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER events_ticket_guard
    BEFORE UPDATE OF event_id, event_type_id ON events_ticket
    FOR EACH ROW EXECUTE FUNCTION events_ticket_guard();
"""

GUARDS_REVERSE = """
DROP TRIGGER IF EXISTS events_question_guard ON events_question;
DROP FUNCTION IF EXISTS events_question_guard();
DROP TRIGGER IF EXISTS events_ticket_guard ON events_ticket;
DROP FUNCTION IF EXISTS events_ticket_guard();
"""


class Migration(migrations.Migration):
    dependencies = [("events", "0002_database_objects")]

    operations = [migrations.RunSQL(GUARDS, GUARDS_REVERSE)]
