"""The host-seam panel counts parked inbox messages through their partial index, not by reading
the inbox (which keeps every message the host ever sent)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from seams.dashboard import seam_panel
from seams.models import InboxStatus
from tests.events import factories
from tests.seams.factories import SeamInboxFactory

pytestmark = pytest.mark.django_db


def test_the_parked_count_reads_the_partial_index_only():
    for status in (InboxStatus.PARKED, InboxStatus.APPLIED, InboxStatus.PARKED):
        SeamInboxFactory(status=status)
    event = factories.EventFactory()
    with CaptureQueriesContext(connection) as captured:
        panel = seam_panel(event)
    assert panel.figures[0].value == 2
    sql = captured.captured_queries[0]["sql"]
    assert "seams_seaminbox" in sql
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # a table this small is read whole
        cursor.execute(f"EXPLAIN {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "seam_inbox_parked" in plan, plan
