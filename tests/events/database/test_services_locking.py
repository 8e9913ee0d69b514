"""events/services/locking.py: a violated constraint, named by PostgreSQL, as a typed error."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, transaction

from events.errors import DomainError, NotFound
from events.models import IntakeIdempotency
from events.services.locking import constraint_refusal, violated_constraint
from tests.events import factories

pytestmark = pytest.mark.django_db


class Taken(DomainError):
    code = "taken"


def duplicate_key(row) -> None:
    IntakeIdempotency.objects.create(
        key=row.key, event=row.event, fingerprint="1" * 64, status_code=201, response={}
    )


def test_the_named_violation_becomes_the_typed_error_after_the_rollback():
    row = factories.IntakeIdempotencyFactory()
    with pytest.raises(Taken) as raised:
        with constraint_refusal("intake_idempotency_key", lambda: Taken("Key taken.")):
            with transaction.atomic():
                duplicate_key(row)
    assert isinstance(raised.value.__cause__, IntegrityError)
    assert violated_constraint(raised.value.__cause__) == "intake_idempotency_key"
    assert IntakeIdempotency.objects.count() == 1  # rolled back: nothing of the block stays


def test_another_constraint_s_violation_and_other_errors_go_on_unchanged():
    row = factories.IntakeIdempotencyFactory()
    with pytest.raises(IntegrityError):
        with constraint_refusal("some_other_constraint", lambda: Taken("never")):
            with transaction.atomic():
                duplicate_key(row)
    with pytest.raises(NotFound):
        with constraint_refusal("intake_idempotency_key", lambda: Taken("never")):
            raise NotFound("Not there.")
    with constraint_refusal("intake_idempotency_key", lambda: Taken("never")):
        pass  # no error: nothing raised
