"""Grant the Event manager its permissions on the desk's first model, the stored nonce answers
(spec.md §9); 0004 grants the offline conflicts once they exist (reference_data names them)."""

from django.db import migrations

from events.reference_data import grant


def forwards(apps, schema_editor):
    grant(apps, app_label="desk")


class Migration(migrations.Migration):
    dependencies = [
        ("desk", "0001_scan_nonce"),
        ("events", "0002_database_objects"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
