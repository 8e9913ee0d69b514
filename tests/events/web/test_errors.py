"""interfaces.md "Error codes": one registry of typed codes, each with its HTTP status, derived
from the enums the apps declare (core's `Code`, and the seams', booths' and leads' own)."""

from __future__ import annotations

import pytest

from events.errors import Code, DomainError, ErrorCode, http_status, register_codes

PINNED = {
    "sold_out": 409,
    "registrations_closed": 409,
    "ticket_required": 400,
    "invalid_ticket": 400,
    "slot_required": 400,
    "invalid_slot": 400,
    "sale_not_started": 409,
    "sale_ended": 409,
    "priced_ticket": 409,
    "invalid_quantity": 400,
    "invalid_attendee": 400,
    "question_required": 400,
    "invalid_answer": 400,
    "invalid_transition": 409,
    "archive_refused": 409,
    "rate_limited": 429,
    "not_found": 404,
    "capability_refused": 404,
    "secret_missing": 503,
    "port_not_wired": 503,
    "template_missing": 409,
    "invalid_signature": 401,
    "stale_timestamp": 401,
    "malformed_message": 400,
    "unknown_reference": 409,
    "booth_unavailable": 409,
    "booth_locked": 409,
    "invalid_predicate": 400,
    "invalid_value": 400,
}


@pytest.mark.parametrize(("code", "status"), sorted(PINNED.items()))
def test_every_pinned_code_is_registered_with_its_status(code, status):
    assert http_status(code) == status


def test_overlay_codes_are_declared_by_their_apps_not_by_core():
    core = {member.value for member in Code}
    assert {"invalid_signature", "booth_locked", "invalid_predicate"} & core == set()


def test_a_code_declared_twice_is_refused():
    class Clash(ErrorCode):
        SOLD_OUT = "sold_out", 400

    with pytest.raises(ValueError, match="declared twice"):
        register_codes(Clash)
    assert http_status("sold_out") == 409


def test_an_unregistered_code_answers_500_and_errors_serialise_the_code_as_text():
    assert http_status("no_such_code") == 500
    error = DomainError("x", code=Code.SOLD_OUT, missing=2)
    assert error.as_dict() == {"error": {"code": "sold_out", "message": "x", "missing": 2}}
