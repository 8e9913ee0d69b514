"""Grant the staff groups their permissions on the offline conflicts (spec.md §9), which 0002
could not: the model did not exist yet."""

from django.db import migrations

from desk.reference_data import grant_permissions


def forwards(apps, schema_editor):
    grant_permissions(apps)


class Migration(migrations.Migration):
    dependencies = [("desk", "0003_offline_conflict")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
