"""Database objects Django does not generate, and the reference data.

- the trigger that makes the audit table append-only (spec.md §8);
- the composite FK (answer.choice, answer.question) → (choice.id, choice.question): a chosen
  choice must belong to the answered question (spec.md §2.7);
- the catalog view `event_linked_products` (spec-overlay.md §6);
- the stages of spec.md §2.2;
- the three permission groups of spec.md §9.
"""

from django.db import migrations

from events import reference_data

AUDIT_TRIGGER = """
CREATE FUNCTION events_audit_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events_eventauditlog is append-only (% refused)', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
CREATE TRIGGER events_audit_append_only
    BEFORE UPDATE OR DELETE ON events_eventauditlog
    FOR EACH ROW EXECUTE FUNCTION events_audit_append_only();
"""
AUDIT_TRIGGER_REVERSE = """
DROP TRIGGER IF EXISTS events_audit_append_only ON events_eventauditlog;
DROP FUNCTION IF EXISTS events_audit_append_only();
"""

ANSWER_CHOICE_FK = """
ALTER TABLE events_registrationanswer
    ADD CONSTRAINT answer_choice_of_question
    FOREIGN KEY (choice_id, question_id)
    REFERENCES events_questionchoice (id, question_id)
    DEFERRABLE INITIALLY DEFERRED;
"""
ANSWER_CHOICE_FK_REVERSE = (
    "ALTER TABLE events_registrationanswer DROP CONSTRAINT IF EXISTS answer_choice_of_question;"
)

LINKED_PRODUCTS_VIEW = """
CREATE VIEW event_linked_products AS
SELECT t.id AS id,
       e.id AS event_id,
       e.name AS event_name,
       e.is_published AS is_published,
       t.id AS ticket_id,
       t.name AS ticket_name,
       t.product_ref AS product_ref,
       t.price AS price,
       e.currency AS currency,
       t.start_sale_datetime AS start_sale_datetime,
       t.end_sale_datetime AS end_sale_datetime
  FROM events_ticket t
  JOIN events_event e ON e.id = t.event_id
 WHERE e.active;
"""
LINKED_PRODUCTS_VIEW_REVERSE = "DROP VIEW IF EXISTS event_linked_products;"

def create_stages(apps, schema_editor):
    reference_data.create_stages(apps)


def create_groups(apps, schema_editor):
    reference_data.create_groups(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("events", "0001_initial"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.RunSQL(AUDIT_TRIGGER, AUDIT_TRIGGER_REVERSE),
        migrations.RunSQL(ANSWER_CHOICE_FK, ANSWER_CHOICE_FK_REVERSE),
        migrations.RunSQL(LINKED_PRODUCTS_VIEW, LINKED_PRODUCTS_VIEW_REVERSE),
        migrations.RunPython(create_stages, migrations.RunPython.noop),
        migrations.RunPython(create_groups, migrations.RunPython.noop),
    ]
