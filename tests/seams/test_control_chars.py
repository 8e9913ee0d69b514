"""The sale seam refuses control characters as the core's intake does (events.inputs):
none in a one-line field (names, emails, phones, companies, refs, campaign tags), only tab and
line breaks in other text (an answer). A refusal is 400 `malformed_message` naming the path, and
nothing is stored; what the seam mints always exports."""

from __future__ import annotations

import pytest

from events.models import QuestionType, Registration
from events.read import exports
from seams.models import SeamInbox
from tests.events import factories as ev
from tests.seams.host import order_message, ticket_line
from tests.seams.test_transport import assert_refused, stored

pytestmark = pytest.mark.django_db


def _partner(**fields) -> dict:
    return {"ref": "P7", "name": "Pat Partner", "email": "pat@example.org", "phone": "", **fields}


CASES = [
    (lambda t: order_message(partner=_partner(name="Pat\x01")), "data.order.partner.name"),
    (
        lambda t: order_message(partner=_partner(company_name="ACME\nInc")),
        "data.order.partner.company_name",
    ),
    (
        lambda t: order_message(lines=[ticket_line(t, 1, attendees=[{"name": "Al\tBee"}])]),
        "data.order.lines[0].attendees[0].name",
    ),
    (
        lambda t: order_message(lines=[ticket_line(t, 1, attendees=[{"phone": "+32\u2028470"}])]),
        "data.order.lines[0].attendees[0].phone",
    ),
    (lambda t: order_message(ref="SO\x7f42"), "data.order.ref"),
    (lambda t: order_message(utm={"source": "mail\x85"}), "data.order.utm.source"),
    (
        lambda t: {"type": "partner.updated", "data": {"partner": _partner(email="p\r@x.org")}},
        "data.partner.email",
    ),
]


@pytest.mark.parametrize(("build", "path"), CASES, ids=[c[1] for c in CASES])
def test_a_control_character_in_a_one_line_field_is_malformed_naming_its_path(
    host, ticket, build, path
):
    before = stored()

    response = host.post(build(ticket))

    assert_refused(response, 400, "malformed_message", before)
    assert response.json()["error"]["path"] == path


@pytest.fixture
def note(ticket):
    return ev.QuestionFactory(event=ticket.event, title="Note", question_type=QuestionType.TEXT_BOX)


def _with_answer(ticket, question, text: str) -> dict:
    attendee = {"name": "Al Bee", "email": "al@example.org", "answers": {str(question.pk): text}}
    return order_message(lines=[ticket_line(ticket, 1, attendees=[attendee])])


@pytest.mark.parametrize("control", ["\x01", "\x0b", "\x1f", "\x7f", "\uffff"], ids=repr)
def test_another_control_character_in_an_answer_is_malformed(host, ticket, note, control):
    before = stored()

    response = host.post(_with_answer(ticket, note, f"two{control}words"))

    assert_refused(response, 400, "malformed_message", before)
    assert response.json()["error"]["path"] == f"data.order.lines[0].attendees[0].answers.{note.pk}"


def test_an_answer_keeps_its_lines_and_tabs_and_the_order_exports(host, ticket, note):
    response = host.post(_with_answer(ticket, note, "line one\r\nline two\tend"))

    assert response.status_code == 200, response.content
    assert SeamInbox.objects.get().status == "applied"
    reg = Registration.objects.get(event=ticket.event)
    assert reg.answers.get().text_value == "line one\r\nline two\tend"
    assert exports.xlsx([ticket.event.pk])  # the workbook builds
