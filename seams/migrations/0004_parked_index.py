# The partial index of parked inbox messages, built without blocking the seam's writes (an
# inbox keeps every message the host sent: a plain CREATE INDEX would hold its write lock for
# the whole scan).

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("seams", "0003_verbose_names"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="seaminbox",
            index=models.Index(
                condition=models.Q(("status", "parked")), fields=["id"], name="seam_inbox_parked"
            ),
        ),
    ]
