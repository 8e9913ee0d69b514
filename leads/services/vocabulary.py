"""The closed predicate vocabulary of lead rules (spec-overlay.md §3.1): validation and matching.

Invariants:
- a predicate is `{"field", "op", "value"}` with `field`/`op` from VOCABULARY and a value of the
  shape that (field, op) declares; anything else is refused `invalid_predicate` naming the
  predicate (its index, field and op) and the part at fault (`part`: field, op or value);
- objects named by a value (tickets, slots, questions, choices) must belong to the rule's scope:
  its event, else an event of its event types, else any event;
- `validate_predicates` returns the canonical form (ids sorted and unique, domains lower-cased,
  states in a fixed order) and accepts its own output unchanged, so a rule read back and saved
  again is unchanged;
- matching is pure Python over a registration and its answers: the pass evaluates a batch with
  no query per registration.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from events.models import (
    Event,
    EventType,
    Question,
    QuestionChoice,
    QuestionType,
    Registration,
    RegistrationAnswer,
    RegistrationState,
    SaleStatus,
    Slot,
    Ticket,
)
from leads.errors import InvalidPredicate

# field → op → value kind (spec-overlay.md §3.1, the table)
VOCABULARY: dict[str, dict[str, str]] = {
    "ticket": {"in": "ticket_ids", "not_in": "ticket_ids"},
    "slot": {"in": "slot_ids", "not_in": "slot_ids"},
    "state": {"in": "states"},
    "sale_status": {"in": "sale_statuses"},
    "answer": {"eq": "answer_choice", "is_set": "answer_question"},
    "email_domain": {"in": "domains", "not_in": "domains"},
    "company_name": {"is_set": "null", "is_not_set": "null"},
    "partner": {"is_set": "null", "is_not_set": "null"},
    "utm_source": {"in": "strings"},
}

STATES = (RegistrationState.DRAFT, RegistrationState.OPEN, RegistrationState.DONE)
SALE_STATUSES = (SaleStatus.FREE, SaleStatus.SOLD, SaleStatus.TO_PAY)
DOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9-]{1,63})+$")
MAX_STRING = 128

# What staff read next to the predicate editor (the admin shows it as a table).
HELP: list[tuple[str, str, str]] = [
    ("ticket", "in, not_in", "list of ticket ids of the rule's event, e.g. [3, 4]"),
    ("slot", "in, not_in", "list of slot ids of the rule's event, e.g. [7]"),
    ("state", "in", 'subset of "draft", "open", "done", e.g. ["open", "done"]'),
    ("sale_status", "in", 'subset of "free", "sold", "to_pay", e.g. ["sold"]'),
    (
        "answer",
        "eq, is_set",
        'eq: {"question": 5, "choice": 12} (a choice question); is_set: {"question": 5}',
    ),
    ("email_domain", "in, not_in", 'list of domains, any case, e.g. ["example.org"]'),
    ("company_name", "is_set, is_not_set", "null (leave empty)"),
    ("partner", "is_set, is_not_set", "null (leave empty): the registration has a host partner"),
    ("utm_source", "in", 'list of sources, e.g. ["newsletter", "linkedin"]'),
]


@dataclass(frozen=True)
class Scope:
    """Where the objects named by a rule's predicates must come from."""

    event_id: int | None = None
    event_type_ids: tuple[int, ...] = ()

    def events(self):
        if self.event_id is not None:
            return Event.objects.filter(pk=self.event_id)
        if self.event_type_ids:
            return Event.objects.filter(event_type_id__in=self.event_type_ids)
        return Event.objects.all()

    def describe(self) -> str:
        if self.event_id is not None:
            return f"event {self.event_id}"
        if self.event_type_ids:
            return f"events of types {list(self.event_type_ids)}"
        return "any event"


def scope_of(*, event: Event | int | None, event_types: Iterable[EventType | int] = ()) -> Scope:
    event_id = event.pk if isinstance(event, Event) else event
    type_ids = sorted({t.pk if isinstance(t, EventType) else int(t) for t in event_types})
    return Scope(event_id=event_id, event_type_ids=tuple(type_ids))


def _refuse(index: int, raw: Any, part: str, message: str) -> InvalidPredicate:
    field = raw.get("field") if isinstance(raw, Mapping) else None
    op = raw.get("op") if isinstance(raw, Mapping) else None
    name = f"{field} {op}" if field and op else str(field or raw)
    return InvalidPredicate(
        f"Predicate {index + 1} ({name}): {message}",
        predicate=index,
        field=field if isinstance(field, str) else None,
        op=op if isinstance(op, str) else None,
        part=part,
    )


def printable(text: str) -> bool:
    """No control character or lone surrogate (the database's text and jsonb refuse NUL and
    surrogates; a source or tag never has the others)."""
    return not any(unicodedata.category(c) in ("Cc", "Cs") for c in text)


def _is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _id_list(value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty list of {what} ids")
    if not all(_is_id(v) for v in value):
        raise ValueError(f"every {what} id must be a positive integer")
    return sorted(set(value))


def _subset(value: Any, allowed: Sequence[str], what: str) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a non-empty list of {what}")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {what} {unknown}; allowed: {list(allowed)}")
    return [s for s in allowed if s in value]


def _strings(value: Any, what: str, pattern: re.Pattern[str] | None = None) -> list[str]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ValueError(f"expected a non-empty list of {what}")
    out = set()
    for item in value:
        text = item.strip().lower() if pattern is not None else item.strip()
        if not text or len(text) > MAX_STRING:
            raise ValueError(f"{what} must be 1 to {MAX_STRING} characters")
        if not printable(text):
            raise ValueError(f"{what} must not contain control characters")
        if pattern is not None and not pattern.match(text):
            raise ValueError(f"{item!r} is not a domain (like example.org)")
        out.add(text)
    return sorted(out)


def _answer(value: Any, with_choice: bool) -> dict[str, int]:
    keys = {"question", "choice"} if with_choice else {"question"}
    if not isinstance(value, Mapping) or set(value) != keys:
        shape = '{"question": id, "choice": id}' if with_choice else '{"question": id}'
        raise ValueError(f"expected {shape}")
    if not all(_is_id(value[k]) for k in keys):
        raise ValueError("question and choice must be positive integer ids")
    return {k: int(value[k]) for k in sorted(keys)}


def _shape(kind: str, value: Any) -> Any:
    """The canonical value of a kind, or ValueError naming what is wrong with its shape."""
    if kind == "ticket_ids":
        return _id_list(value, "ticket")
    if kind == "slot_ids":
        return _id_list(value, "slot")
    if kind == "states":
        return _subset(value, STATES, "states")
    if kind == "sale_statuses":
        return _subset(value, SALE_STATUSES, "sale statuses")
    if kind == "answer_choice":
        return _answer(value, with_choice=True)
    if kind == "answer_question":
        return _answer(value, with_choice=False)
    if kind == "domains":
        return _strings(value, "domains", DOMAIN)
    if kind == "strings":
        return _strings(value, "strings")
    if kind == "null":
        if value is not None:
            raise ValueError("takes no value (null)")
        return None
    raise AssertionError(f"unknown value kind {kind}")


@dataclass
class _Lookups:
    """The objects named by all predicates, fetched once per validation (three queries)."""

    tickets: dict[int, int | None]  # id → event id
    slots: dict[int, int]
    questions: dict[int, tuple[int | None, str]]  # id → (event id, type)
    choices: dict[int, int]  # id → question id


def _lookups(canonical: list[tuple[int, Any, dict]]) -> _Lookups:
    tickets: set[int] = set()
    slots: set[int] = set()
    questions: set[int] = set()
    choices: set[int] = set()
    for _, _, p in canonical:
        if p["field"] == "ticket":
            tickets |= set(p["value"])
        elif p["field"] == "slot":
            slots |= set(p["value"])
        elif p["field"] == "answer":
            questions.add(p["value"]["question"])
            if "choice" in p["value"]:
                choices.add(p["value"]["choice"])
    return _Lookups(
        tickets=dict(Ticket.objects.filter(pk__in=tickets).values_list("pk", "event_id"))
        if tickets
        else {},
        slots=dict(Slot.objects.filter(pk__in=slots).values_list("pk", "event_id"))
        if slots
        else {},
        questions={
            pk: (event_id, qtype)
            for pk, event_id, qtype in Question.objects.filter(pk__in=questions).values_list(
                "pk", "event_id", "question_type"
            )
        }
        if questions
        else {},
        choices=dict(QuestionChoice.objects.filter(pk__in=choices).values_list("pk", "question_id"))
        if choices
        else {},
    )


def _in_scope(event_ids: set[int | None], scope: Scope) -> set[int | None]:
    """The event ids among `event_ids` that are outside the scope."""
    if None in event_ids:
        outside: set[int | None] = {None}
        event_ids = event_ids - {None}
    else:
        outside = set()
    if scope.event_id is not None:
        return outside | {e for e in event_ids if e != scope.event_id}
    if scope.event_type_ids:
        inside = set(
            Event.objects.filter(
                pk__in=event_ids, event_type_id__in=scope.event_type_ids
            ).values_list("pk", flat=True)
        )
        return outside | (event_ids - inside)
    return outside


def validate_predicates(predicates: Iterable[Any], *, scope: Scope) -> list[dict[str, Any]]:
    """The canonical form of `predicates`, or InvalidPredicate naming the first bad one."""
    canonical: list[tuple[int, Any, dict]] = []
    for index, raw in enumerate(predicates):
        if not isinstance(raw, Mapping):
            raise _refuse(index, raw, "field", "a predicate is a mapping {field, op, value}")
        extra = set(raw) - {"field", "op", "value"}
        if extra:
            raise _refuse(index, raw, "field", f"unknown keys {sorted(extra)}")
        field, op = raw.get("field"), raw.get("op")
        if field not in VOCABULARY:
            raise _refuse(index, raw, "field", f"unknown field; allowed: {sorted(VOCABULARY)}")
        ops = VOCABULARY[field]
        if op not in ops:
            raise _refuse(index, raw, "op", f"{field} allows only {sorted(ops)}")
        try:
            value = _shape(ops[op], raw.get("value"))
        except ValueError as exc:
            raise _refuse(index, raw, "value", str(exc)) from None
        canonical.append((index, raw, {"field": field, "op": op, "value": value}))

    found = _lookups(canonical)
    for index, raw, p in canonical:
        _check_objects(index, raw, p, found, scope)
    return [p for _, _, p in canonical]


def _check_objects(index: int, raw: Any, p: dict, found: _Lookups, scope: Scope) -> None:
    field, value = p["field"], p["value"]
    if field in ("ticket", "slot"):
        table = found.tickets if field == "ticket" else found.slots
        missing = [i for i in value if i not in table]
        if missing:
            raise _refuse(index, raw, "value", f"no {field} {missing}")
        outside = _in_scope({table[i] for i in value}, scope)
        bad = [i for i in value if table[i] in outside]
        if bad:
            raise _refuse(index, raw, "value", f"{field} {bad} not of {scope.describe()}")
    elif field == "answer":
        question = value["question"]
        if question not in found.questions:
            raise _refuse(index, raw, "value", f"no question {question}")
        event_id, qtype = found.questions[question]
        if _in_scope({event_id}, scope):
            raise _refuse(index, raw, "value", f"question {question} not of {scope.describe()}")
        if "choice" in value:
            if qtype != QuestionType.SIMPLE_CHOICE:
                raise _refuse(index, raw, "value", f"question {question} has no choices")
            if found.choices.get(value["choice"]) != question:
                raise _refuse(
                    index, raw, "value", f"choice {value['choice']} is not of question {question}"
                )


# --- matching --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Facts:
    """What predicates read of one registration (its answers included)."""

    registration: Registration
    choices: Mapping[int, frozenset[int]]  # question id → chosen choice ids
    answered: frozenset[int]  # question ids with a choice or a non-empty text

    @property
    def email_domain(self) -> str:
        email = self.registration.email or ""
        return email.rpartition("@")[2].strip().lower() if "@" in email else ""


class Answer(NamedTuple):
    """One answer as the pass reads it (no model instances: a batch reads thousands)."""

    question_id: int
    choice_id: int | None
    text_value: str | None
    title: str
    choice_name: str | None


def answers_of(registration_ids: Iterable[int]) -> dict[int, list[Answer]]:
    """The answers of these registrations, in question order: one query."""
    rows = (
        RegistrationAnswer.objects.filter(registration_id__in=list(registration_ids))
        .order_by("registration_id", "question__sequence", "question_id", "id")
        .values_list(
            "registration_id",
            "question_id",
            "choice_id",
            "text_value",
            "question__title",
            "choice__name",
        )
    )
    out: dict[int, list[Answer]] = {}
    for registration_id, question_id, choice_id, text_value, title, choice_name in rows:
        out.setdefault(registration_id, []).append(
            Answer(question_id, choice_id, text_value, title, choice_name)
        )
    return out


def facts_of(registration: Registration, answers: Sequence[Answer] = ()) -> Facts:
    """Facts of a registration and its answers."""
    choices: dict[int, set[int]] = {}
    answered: set[int] = set()
    for answer in answers:
        if answer.choice_id is not None:
            choices.setdefault(answer.question_id, set()).add(answer.choice_id)
            answered.add(answer.question_id)
        elif (answer.text_value or "").strip():
            answered.add(answer.question_id)
    return Facts(
        registration=registration,
        choices={q: frozenset(c) for q, c in choices.items()},
        answered=frozenset(answered),
    )


Test = Callable[[Facts], bool]


def compile_predicate(field: str, op: str, value: Any) -> Test:
    """One predicate (canonical form) as a test of a registration's facts."""
    if field in ("ticket", "slot"):
        ids = frozenset(value)
        attr = f"{field}_id"
        if op == "in":
            return lambda f: getattr(f.registration, attr) in ids
        return lambda f: getattr(f.registration, attr) not in ids
    if field in ("state", "sale_status"):
        allowed = frozenset(value)
        return lambda f: getattr(f.registration, field) in allowed
    if field == "answer":
        question = value["question"]
        if op == "eq":
            choice = value["choice"]
            return lambda f: choice in f.choices.get(question, frozenset())
        return lambda f: question in f.answered
    if field == "email_domain":
        domains = frozenset(value)
        if op == "in":
            return lambda f: f.email_domain in domains
        return lambda f: f.email_domain not in domains
    if field == "company_name":
        if op == "is_set":
            return lambda f: bool((f.registration.company_name or "").strip())
        return lambda f: not (f.registration.company_name or "").strip()
    if field == "partner":
        if op == "is_set":
            return lambda f: bool(f.registration.partner_ref)
        return lambda f: not f.registration.partner_ref
    if field == "utm_source":
        sources = frozenset(value)
        return lambda f: (f.registration.utm_source or "").strip() in sources
    raise AssertionError(f"not in the vocabulary: {field} {op}")


def compile_all(predicates: Iterable[Any]) -> Test:
    """All predicates must hold (an empty list holds for every registration)."""
    tests = [compile_predicate(p.field, p.op, p.value) for p in predicates]
    return lambda f: all(t(f) for t in tests)
