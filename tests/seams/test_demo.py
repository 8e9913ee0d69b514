"""`seed_demo` leaves one applied and one parked sale-seam message (idempotent)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from events.models import Registration
from seams.models import SeamInbox

pytestmark = pytest.mark.django_db


def test_seed_demo_leaves_an_applied_and_a_parked_message():
    for _ in range(2):
        call_command("seed_demo", stdout=io.StringIO())
    rows = dict(SeamInbox.objects.values_list("message_id", "status"))
    assert rows == {"msg_demo_applied": "applied", "msg_demo_parked": "parked"}
    assert SeamInbox.objects.get(status="parked").error_code == "unknown_reference"
    assert Registration.objects.filter(sale_order_ref="SO-DEMO-1").count() == 2
