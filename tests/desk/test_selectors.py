"""desk/selectors.py: the scan's reads, written by the ORM once and run on Django's cursor, answer
what the ORM's own querysets answer, in one query each."""

from __future__ import annotations

import pytest

from desk import selectors
from events.models import Registration
from tests.events import factories

pytestmark = pytest.mark.django_db


def values(instance) -> dict:
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


@pytest.mark.parametrize("with_ticket_and_slot", [True, False])
def test_the_lookup_answers_as_select_related_with_its_relations_loaded(
    with_ticket_and_slot, django_assert_num_queries
):
    event = factories.EventFactory(is_multi_slots=with_ticket_and_slot)
    extra = {}
    if with_ticket_and_slot:
        extra = {
            "ticket": factories.TicketFactory(event=event, price="12.50"),
            "slot": factories.SlotFactory(event=event),
        }
    reg = factories.RegistrationFactory(event=event, **extra)
    expected = Registration.objects.select_related("event__stage", "ticket", "slot").get(pk=reg.pk)

    for read in (
        lambda: selectors.scanned_registration(barcode=reg.barcode),
        lambda: selectors.desk_registration(registration_id=reg.pk),
    ):
        with django_assert_num_queries(1):
            found = read().registration
        with django_assert_num_queries(0):
            related = (found.event, found.event.stage, found.ticket, found.slot)
        assert values(found) == values(expected)
        assert values(related[0]) == values(expected.event)
        assert values(related[1]) == values(expected.event.stage)
        if with_ticket_and_slot:
            assert values(related[2]) == values(expected.ticket)
            assert values(related[3]) == values(expected.slot)
        else:
            assert related[2:] == (None, None)
        assert not found._state.adding  # saved rows, as the ORM loads them


def test_a_barcode_or_id_nobody_holds_finds_nothing():
    reg = factories.RegistrationFactory()
    assert selectors.scanned_registration(barcode=reg.barcode.upper() + "0") is None
    assert selectors.scanned_registration(barcode=reg.barcode[:-1]) is None  # no prefix match
    assert selectors.desk_registration(registration_id=reg.pk + 1000) is None


def test_choice_answers_in_question_order_without_free_text(django_assert_num_queries):
    reg = factories.RegistrationFactory()
    late = factories.QuestionChoiceFactory(
        question__event=reg.event, question__sequence=20, question__title="Diet", name="Vegan"
    )
    early = factories.QuestionChoiceFactory(
        question__event=reg.event, question__sequence=10, question__title="Size", name="M"
    )
    for choice in (late, early):
        factories.RegistrationAnswerFactory(
            registration=reg, question=choice.question, choice=choice, text_value=None
        )
    factories.RegistrationAnswerFactory(registration=reg, text_value="free text")
    with django_assert_num_queries(1):
        assert selectors.choice_answers(registration_id=reg.pk) == ["Size: M", "Diet: Vegan"]
    # The scan's lookup reads the same answers in its own statement.
    for read in (
        lambda: selectors.scanned_registration(barcode=reg.barcode),
        lambda: selectors.desk_registration(registration_id=reg.pk),
    ):
        with django_assert_num_queries(1):
            assert read().answers == ["Size: M", "Diet: Vegan"]
    bare = factories.RegistrationFactory(event=reg.event)
    assert selectors.scanned_registration(barcode=bare.barcode).answers == []
    assert selectors.choice_answers(registration_id=bare.pk) == []
