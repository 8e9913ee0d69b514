"""Grant the staff groups their permissions on the outbound webhook models (spec.md §9), which
0002 could not: they did not exist yet."""

from django.db import migrations

from seams.reference_data import grant_permissions


def forwards(apps, schema_editor):
    grant_permissions(apps)


class Migration(migrations.Migration):
    dependencies = [("seams", "0007_webhooks_trigger")]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
