# The admin list's order (newest first) as an index, built without blocking the seam's writes
# (seams/0004 says why).

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("seams", "0004_parked_index"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="seaminbox",
            index=models.Index(fields=["-received_at", "-id"], name="seam_inbox_newest"),
        ),
    ]
