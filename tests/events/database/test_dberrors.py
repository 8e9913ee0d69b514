"""events/services/dberrors.py: services decide on the violated constraint's name."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction

from events.db.dberrors import guard_refusal, violated_constraint
from events.models import IntakeIdempotency
from tests.events import factories

pytestmark = pytest.mark.django_db


def test_a_unique_violation_names_its_constraint():
    row = factories.IntakeIdempotencyFactory()
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        IntakeIdempotency.objects.create(
            key=row.key, event=row.event, fingerprint="1" * 64, status_code=201, response={}
        )
    assert violated_constraint(caught.value) == "intake_idempotency_key"


def test_a_unique_field_names_its_index():
    first = factories.RegistrationFactory()
    with pytest.raises(IntegrityError) as caught, transaction.atomic():
        factories.RegistrationFactory(event=first.event, barcode=first.barcode)
    assert "barcode" in violated_constraint(caught.value)


def test_an_error_without_diagnostics_names_nothing():
    assert violated_constraint(IntegrityError("no cause")) == ""


def test_a_guard_refusal_reads_its_message_and_detail():
    with pytest.raises(DatabaseError) as caught, transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT events_rows_guard(0, 1, 'registration')")
    assert guard_refusal(caught.value) == (
        "events_rows_missing",
        "registration: 0 of 1 rows changed",
    )
    assert guard_refusal(DatabaseError("no cause")) == ("", "")
