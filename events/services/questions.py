"""Question and choice verbs, for an event's questions and an event type's (spec.md §2.7).

Invariants:
- an event's question (and its choices) change only under the Event row lock (bookings read
  questions under it), a type's under the EventType row lock; then decide, write, and one
  audit row (`question.*`, `choice.*`) in the same transaction;
- an answered question keeps its type and owner and is never deleted (a database trigger,
  migration 0003, refuses the change too); a chosen choice is never deleted nor moved;
- every refusal is `ValidationFailed` naming the field, with nothing written.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events.db import locks
from events.errors import ValidationFailed
from events.models import Event, EventType, Question, QuestionChoice
from events.services import audit
from events.services.event_types import lock_event_type
from events.services.reference import apply_fields, check_fields, check_texts, jsonable

QUESTION_FIELDS = frozenset(
    {
        "title",
        "question_type",
        "is_mandatory_answer",
        "once_per_order",
        "sequence",
        "active",
        "translations",
    }
)
CHOICE_FIELDS = frozenset({"name", "sequence", "translations"})


def _lock_owner(event_id: int | None, event_type_id: int | None) -> None:
    if event_id is not None:
        locks.lock_event(event_id)
    elif event_type_id is not None:
        lock_event_type(event_type_id)
    else:
        raise ValidationFailed("A question belongs to an event or an event type.", field="event")


def _lock_question(question_id: int) -> Question:
    """The owner's lock first (fixed order: event, then its rows), then the question row."""
    owner = Question.objects.values("event_id", "event_type_id").get(pk=question_id)
    _lock_owner(owner["event_id"], owner["event_type_id"])
    return Question.objects.select_for_update().get(pk=question_id)


def create_question(
    *,
    actor: Any,
    event: Event | None = None,
    event_type: EventType | None = None,
    **fields: Any,
) -> Question:
    check_fields(fields, QUESTION_FIELDS)
    check_texts(fields, Question)
    if (event is None) == (event_type is None):
        raise ValidationFailed("A question belongs to an event or an event type.", field="event")
    event_id = event.pk if event is not None else None
    type_id = event_type.pk if event_type is not None else None
    with transaction.atomic():
        _lock_owner(event_id, type_id)
        question = Question(event_id=event_id, event_type_id=type_id, **fields)
        question.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="question.created",
            event=event_id,
            data={
                "question": question.pk,
                "event_type": type_id,
                **{k: jsonable(v) for k, v in fields.items()},
            },
        )
    return question


def update_question(*, question: Question, actor: Any, **fields: Any) -> Question:
    """Change a question; an answered one keeps its type (`field="question_type"`)."""
    check_fields(fields, QUESTION_FIELDS)
    check_texts(fields, Question)
    with transaction.atomic():
        locked = _lock_question(question.pk)
        changes = apply_fields(locked, fields)
        if not changes:
            return locked
        if "question_type" in changes and locked.answers.exists():
            raise ValidationFailed(
                "This question has answers: its type cannot change.", field="question_type"
            )
        locked.save(update_fields=list(changes))
        audit.record(
            actor=actor,
            verb="question.updated",
            event=locked.event_id,
            data={"question": locked.pk, "event_type": locked.event_type_id, **changes},
        )
    return locked


def delete_question(*, question: Question, actor: Any) -> None:
    """Refused once answered (deactivate it instead: `active=False`)."""
    with transaction.atomic():
        locked = _lock_question(question.pk)
        if locked.answers.exists():
            raise ValidationFailed(
                "This question has answers: deactivate it instead of deleting it.",
                field="question",
                question=locked.pk,
            )
        audit.record(
            actor=actor,
            verb="question.deleted",
            event=locked.event_id,
            data={"question": locked.pk, "event_type": locked.event_type_id, "title": locked.title},
        )
        locked.delete()


# --- choices ----------------------------------------------------------------------------------


def create_choice(*, question: Question, actor: Any, **fields: Any) -> QuestionChoice:
    check_fields(fields, CHOICE_FIELDS)
    check_texts(fields, QuestionChoice)
    with transaction.atomic():
        locked = _lock_question(question.pk)
        choice = QuestionChoice(question=locked, **fields)
        choice.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="choice.created",
            event=locked.event_id,
            data={
                "choice": choice.pk,
                "question": locked.pk,
                **{k: jsonable(v) for k, v in fields.items()},
            },
        )
    return choice


def update_choice(*, choice: QuestionChoice, actor: Any, **fields: Any) -> QuestionChoice:
    check_fields(fields, CHOICE_FIELDS)
    check_texts(fields, QuestionChoice)
    with transaction.atomic():
        question = _lock_question(choice.question_id)
        locked = QuestionChoice.objects.select_for_update().get(pk=choice.pk)
        changes = apply_fields(locked, fields)
        if not changes:
            return locked
        locked.save(update_fields=list(changes))
        audit.record(
            actor=actor,
            verb="choice.updated",
            event=question.event_id,
            data={"choice": locked.pk, "question": question.pk, **changes},
        )
    return locked


def delete_choice(*, choice: QuestionChoice, actor: Any) -> None:
    """Refused once an attendee chose it (the answer points at it)."""
    with transaction.atomic():
        question = _lock_question(choice.question_id)
        locked = QuestionChoice.objects.select_for_update().get(pk=choice.pk)
        if locked.answers.exists():
            raise ValidationFailed(
                "Attendees chose this answer: it cannot be deleted.",
                field="choice",
                choice=locked.pk,
            )
        audit.record(
            actor=actor,
            verb="choice.deleted",
            event=question.event_id,
            data={"choice": locked.pk, "question": question.pk, "name": locked.name},
        )
        locked.delete()
