"""Grant the staff groups their permissions on this overlay's models (spec.md §9)."""

from django.db import migrations

from desk.reference_data import grant_permissions


def forwards(apps, schema_editor):
    grant_permissions(apps)


class Migration(migrations.Migration):
    dependencies = [
        ("desk", "0001_offline_conflict"),
        ("events", "0002_database_objects"),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
