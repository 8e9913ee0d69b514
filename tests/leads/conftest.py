"""Fixtures of the leads tests: the built-in sink is wired (the code's default refuses), and a
small world of objects predicates can name."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import override_settings

from events.models import Event, Question, QuestionChoice, Slot, Ticket
from tests.events import factories


@pytest.fixture(autouse=True)
def local_sink():
    with override_settings(EVENT_LEAD_SINK="leads.adapters.LocalLeadSink"):
        yield


@dataclass
class World:
    event: Event
    other: Event
    tickets: list[Ticket]
    slots: list[Slot]
    question: Question  # simple choice
    choices: list[QuestionChoice]
    text_question: Question
    other_ticket: Ticket
    other_question: Question


@pytest.fixture
def world(db) -> World:
    event_type = factories.EventTypeFactory()
    event = factories.EventFactory(name="Lead Summit", event_type=event_type)
    other = factories.EventFactory(name="Other Event")
    question = factories.QuestionFactory(
        event=event, title="Company size", question_type="simple_choice"
    )
    return World(
        event=event,
        other=other,
        tickets=[factories.TicketFactory(event=event, name=n) for n in ("Standard", "VIP")],
        slots=[factories.SlotFactory(event=event) for _ in range(2)],
        question=question,
        choices=[
            factories.QuestionChoiceFactory(question=question, name=n) for n in ("1-10", "11+")
        ],
        text_question=factories.QuestionFactory(event=event, title="Dietary needs"),
        other_ticket=factories.TicketFactory(event=other),
        other_question=factories.QuestionFactory(event=other, question_type="simple_choice"),
    )
