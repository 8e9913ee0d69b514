"""The closed predicate vocabulary: every field/op matches and does not
match as specified; every malformed predicate is refused `invalid_predicate` naming it, writing
nothing; a rule read back and saved again is unchanged (also as a hypothesis property)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.errors import ValidationFailed
from events.models import EventAuditLog, Registration
from leads import services
from leads.errors import InvalidPredicate
from leads.models import LeadRule, LeadRulePredicate
from leads.services import vocabulary


def facts(answers: dict | None = None, **fields) -> vocabulary.Facts:
    """The facts of an (unsaved) registration with these fields and answers
    ({question id: choice id | text})."""
    registration = Registration(**{"state": "open", "email": "", **fields})
    choices, answered = {}, set()
    for question, value in (answers or {}).items():
        if isinstance(value, int):
            choices[question] = frozenset({value})
            answered.add(question)
        elif value.strip():
            answered.add(question)
    return vocabulary.Facts(registration, choices, frozenset(answered))


# (field, op, value(world), fields that hold, fields that do not hold): each a list of
# registration-field mappings (with an optional "answers" key).
CASES = [
    (
        "ticket",
        "in",
        lambda w: [w.tickets[0].pk],
        lambda w: [{"ticket_id": w.tickets[0].pk}],
        lambda w: [{"ticket_id": w.tickets[1].pk}, {"ticket_id": None}],
    ),
    (
        "ticket",
        "not_in",
        lambda w: [w.tickets[0].pk],
        lambda w: [{"ticket_id": w.tickets[1].pk}, {"ticket_id": None}],
        lambda w: [{"ticket_id": w.tickets[0].pk}],
    ),
    (
        "slot",
        "in",
        lambda w: [w.slots[1].pk],
        lambda w: [{"slot_id": w.slots[1].pk}],
        lambda w: [{"slot_id": w.slots[0].pk}, {"slot_id": None}],
    ),
    (
        "slot",
        "not_in",
        lambda w: [w.slots[1].pk],
        lambda w: [{"slot_id": w.slots[0].pk}, {"slot_id": None}],
        lambda w: [{"slot_id": w.slots[1].pk}],
    ),
    (
        "state",
        "in",
        lambda w: ["open", "done"],
        lambda w: [{"state": "open"}, {"state": "done"}],
        lambda w: [{"state": "draft"}, {"state": "cancel"}],
    ),
    (
        "sale_status",
        "in",
        lambda w: ["sold"],
        lambda w: [{"sale_status": "sold"}],
        lambda w: [{"sale_status": "free"}, {"sale_status": "to_pay"}],
    ),
    (
        "answer",
        "eq",
        lambda w: {"question": w.question.pk, "choice": w.choices[0].pk},
        lambda w: [{"answers": {w.question.pk: w.choices[0].pk}}],
        lambda w: [{"answers": {w.question.pk: w.choices[1].pk}}, {"answers": {}}],
    ),
    (
        "answer",
        "is_set",
        lambda w: {"question": w.text_question.pk},
        lambda w: [{"answers": {w.text_question.pk: "vegan"}}],
        lambda w: [
            {"answers": {}},
            {"answers": {w.text_question.pk: "  "}},
            {"answers": {w.question.pk: w.choices[0].pk}},
        ],
    ),
    (
        "email_domain",
        "in",
        lambda w: ["example.org"],
        lambda w: [{"email": "ada@example.org"}, {"email": "Ada@EXAMPLE.ORG"}],
        lambda w: [{"email": "ada@example.com"}, {"email": "ada@sub.example.org"}, {"email": ""}],
    ),
    (
        "email_domain",
        "not_in",
        lambda w: ["example.org"],
        lambda w: [{"email": "ada@example.com"}, {"email": ""}],
        lambda w: [{"email": "ada@example.org"}, {"email": "x@Example.Org"}],
    ),
    (
        "company_name",
        "is_set",
        lambda w: None,
        lambda w: [{"company_name": "Acme"}],
        lambda w: [{"company_name": ""}, {"company_name": "   "}],
    ),
    (
        "company_name",
        "is_not_set",
        lambda w: None,
        lambda w: [{"company_name": ""}],
        lambda w: [{"company_name": "Acme"}],
    ),
    (
        "partner",
        "is_set",
        lambda w: None,
        lambda w: [{"partner_ref": "P-1"}],
        lambda w: [{"partner_ref": ""}],
    ),
    (
        "partner",
        "is_not_set",
        lambda w: None,
        lambda w: [{"partner_ref": ""}],
        lambda w: [{"partner_ref": "P-1"}],
    ),
    (
        "utm_source",
        "in",
        lambda w: ["newsletter"],
        lambda w: [{"utm_source": "newsletter"}],
        lambda w: [{"utm_source": "linkedin"}, {"utm_source": ""}],
    ),
]


def test_the_cases_cover_the_whole_vocabulary():
    covered = {(field, op) for field, op, *_ in CASES}
    assert covered == {(f, op) for f, ops in vocabulary.VOCABULARY.items() for op in ops}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "op", "value", "holds", "fails"), CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES]
)
def test_each_field_and_op_matches_as_specified(world, field, op, value, holds, fails):
    scope = vocabulary.scope_of(event=world.event)
    (predicate,) = vocabulary.validate_predicates(
        [{"field": field, "op": op, "value": value(world)}], scope=scope
    )
    test = vocabulary.compile_predicate(**predicate)
    for fields in holds(world):
        assert test(facts(**fields)) is True, fields
    for fields in fails(world):
        assert test(facts(**fields)) is False, fields


# Malformed predicates: (predicate(world), the part at fault). Each is given second, after a
# valid one, so the refusal must name index 1.
MALFORMED = [
    (lambda w: "state in open", "field"),
    (lambda w: {"field": "state", "op": "in", "value": ["open"], "extra": 1}, "field"),
    (lambda w: {"field": "price", "op": "in", "value": [1]}, "field"),
    (lambda w: {"op": "in", "value": ["open"]}, "field"),
    (lambda w: {"field": "state", "op": "not_in", "value": ["open"]}, "op"),
    (lambda w: {"field": "ticket", "op": "eq", "value": [w.tickets[0].pk]}, "op"),
    (lambda w: {"field": "ticket", "op": "in", "value": w.tickets[0].pk}, "value"),
    (lambda w: {"field": "ticket", "op": "in", "value": []}, "value"),
    (lambda w: {"field": "ticket", "op": "in", "value": [True]}, "value"),
    (lambda w: {"field": "ticket", "op": "in", "value": [str(w.tickets[0].pk)]}, "value"),
    (lambda w: {"field": "ticket", "op": "in", "value": [w.other_ticket.pk]}, "value"),
    (lambda w: {"field": "ticket", "op": "not_in", "value": [10**9]}, "value"),
    (lambda w: {"field": "slot", "op": "in", "value": [w.tickets[0].pk + 10**8]}, "value"),
    (lambda w: {"field": "state", "op": "in", "value": ["cancel"]}, "value"),
    (lambda w: {"field": "state", "op": "in", "value": "open"}, "value"),
    (lambda w: {"field": "sale_status", "op": "in", "value": ["paid"]}, "value"),
    (lambda w: {"field": "answer", "op": "eq", "value": {"question": w.question.pk}}, "value"),
    (
        lambda w: {
            "field": "answer",
            "op": "eq",
            "value": {"question": w.question.pk, "choice": w.choices[0].pk, "x": 1},
        },
        "value",
    ),
    (
        lambda w: {
            "field": "answer",
            "op": "eq",
            "value": {"question": w.text_question.pk, "choice": w.choices[0].pk},
        },
        "value",
    ),
    (
        lambda w: {
            "field": "answer",
            "op": "eq",
            "value": {"question": w.question.pk, "choice": w.choices[0].pk + 10**8},
        },
        "value",
    ),
    (
        lambda w: {"field": "answer", "op": "is_set", "value": {"question": w.other_question.pk}},
        "value",
    ),
    (lambda w: {"field": "answer", "op": "is_set", "value": [w.question.pk]}, "value"),
    (lambda w: {"field": "email_domain", "op": "in", "value": ["not a domain"]}, "value"),
    (lambda w: {"field": "email_domain", "op": "in", "value": ["@example.org"]}, "value"),
    (lambda w: {"field": "email_domain", "op": "in", "value": "example.org"}, "value"),
    (lambda w: {"field": "company_name", "op": "is_set", "value": "Acme"}, "value"),
    (lambda w: {"field": "partner", "op": "is_not_set", "value": []}, "value"),
    (lambda w: {"field": "utm_source", "op": "in", "value": [""]}, "value"),
    (lambda w: {"field": "utm_source", "op": "in", "value": [1]}, "value"),
    (lambda w: {"field": "utm_source", "op": "in", "value": ["x" * 129]}, "value"),
    # the database refuses NUL in jsonb and lone surrogates in text: refused here, not a 500
    (lambda w: {"field": "utm_source", "op": "in", "value": ["news\x00letter"]}, "value"),
    (lambda w: {"field": "utm_source", "op": "in", "value": ["news\ud800"]}, "value"),
]


@pytest.mark.django_db
@pytest.mark.parametrize(("bad", "part"), MALFORMED)
def test_a_malformed_predicate_is_refused_naming_it_and_nothing_is_written(world, actor, bad, part):
    good = {"field": "state", "op": "in", "value": ["open"]}
    predicate = bad(world)
    rules, rows, audit = (
        LeadRule.objects.count(),
        LeadRulePredicate.objects.count(),
        EventAuditLog.objects.count(),
    )
    with pytest.raises(InvalidPredicate) as refused:
        services.create_rule(
            name="bad",
            lead_creation_basis="attendee",
            lead_creation_trigger="create",
            lead_type="lead",
            event=world.event,
            predicates=[good, predicate],
            actor=actor,
        )
    assert refused.value.code == "invalid_predicate"
    assert refused.value.details["predicate"] == 1
    assert refused.value.details["part"] == part
    if isinstance(predicate, dict) and isinstance(predicate.get("field"), str):
        assert refused.value.details["field"] == predicate["field"]
    assert (
        LeadRule.objects.count(),
        LeadRulePredicate.objects.count(),
        EventAuditLog.objects.count(),
    ) == (rules, rows, audit)


@pytest.mark.django_db
def test_update_with_a_bad_predicate_writes_nothing(world, actor):
    rule = services.create_rule(
        name="r",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        event=world.event,
        predicates=[{"field": "ticket", "op": "in", "value": [world.tickets[0].pk]}],
        actor=actor,
    )
    before = list(LeadRulePredicate.objects.values_list("pk", "field", "op", "value"))
    audit = EventAuditLog.objects.count()
    with pytest.raises(InvalidPredicate) as refused:
        services.update_rule(
            rule=rule,
            name="renamed",
            predicates=[{"field": "ticket", "op": "in", "value": [world.other_ticket.pk]}],
            actor=actor,
        )
    assert refused.value.details["predicate"] == 0
    rule.refresh_from_db()
    assert rule.name == "r"
    assert list(LeadRulePredicate.objects.values_list("pk", "field", "op", "value")) == before
    assert EventAuditLog.objects.count() == audit


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", "Rule\x00"),
        ("team_ref", "T\x00-1"),
        ("user_ref", "U\ud800"),
        ("tag_refs", ["v\x00"]),
    ],
)
def test_rule_fields_the_database_cannot_store_are_refused_invalid_value(
    world, actor, field, value
):
    fields = {
        "name": "r",
        "lead_creation_basis": "attendee",
        "lead_creation_trigger": "create",
        "lead_type": "lead",
        "event": world.event,
        field: value,
    }
    audit = EventAuditLog.objects.count()
    with pytest.raises(ValidationFailed) as refused:
        services.create_rule(**fields, actor=actor)
    assert (refused.value.code, refused.value.details["field"]) == ("invalid_value", field)
    assert (LeadRule.objects.count(), EventAuditLog.objects.count()) == (0, audit)


@pytest.mark.django_db
def test_moving_a_rule_to_another_event_revalidates_its_kept_predicates(world, actor):
    rule = services.create_rule(
        name="r",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        event=world.event,
        predicates=[{"field": "ticket", "op": "in", "value": [world.tickets[0].pk]}],
        actor=actor,
    )
    with pytest.raises(InvalidPredicate):
        services.update_rule(rule=rule, event=world.other, actor=actor)
    rule.refresh_from_db()
    assert rule.event_id == world.event.pk


@pytest.mark.django_db
def test_event_type_scope_accepts_objects_of_its_events_only(world, actor):
    scope = vocabulary.scope_of(event=None, event_types=[world.event.event_type_id])
    ok = [{"field": "ticket", "op": "in", "value": [world.tickets[0].pk]}]
    assert vocabulary.validate_predicates(ok, scope=scope) == ok
    with pytest.raises(InvalidPredicate):
        vocabulary.validate_predicates(
            [{"field": "ticket", "op": "in", "value": [world.other_ticket.pk]}], scope=scope
        )


@pytest.mark.django_db
def test_a_rule_read_back_and_saved_again_is_unchanged(world, actor):
    messy = [
        {
            "field": "ticket",
            "op": "in",
            "value": [world.tickets[1].pk, world.tickets[0].pk, world.tickets[1].pk],
        },
        {"field": "email_domain", "op": "not_in", "value": [" Example.ORG", "b.example"]},
        {"field": "state", "op": "in", "value": ["done", "open"]},
        {"field": "company_name", "op": "is_set"},
    ]
    rule = services.create_rule(
        name="r",
        lead_creation_basis="order",
        lead_creation_trigger="confirm",
        lead_type="opportunity",
        event=world.event,
        tag_refs=["a"],
        predicates=messy,
        actor=actor,
    )
    read = services.predicates_of(rule)
    assert read == [
        {"field": "ticket", "op": "in", "value": sorted(t.pk for t in world.tickets)},
        {"field": "email_domain", "op": "not_in", "value": ["b.example", "example.org"]},
        {"field": "state", "op": "in", "value": ["open", "done"]},
        {"field": "company_name", "op": "is_set", "value": None},
    ]
    rows = list(LeadRulePredicate.objects.order_by("pk").values_list("pk", "field", "op", "value"))
    audit = EventAuditLog.objects.count()
    again = services.update_rule(rule=rule, predicates=read, name=rule.name, actor=actor)
    assert services.predicates_of(again) == read
    assert (
        list(LeadRulePredicate.objects.order_by("pk").values_list("pk", "field", "op", "value"))
        == rows
    )
    assert EventAuditLog.objects.count() == audit  # nothing changed, nothing written


def _valid_predicates(w):
    ids = st.lists(st.sampled_from([t.pk for t in w.tickets]), min_size=1, max_size=4)
    slots = st.lists(st.sampled_from([s.pk for s in w.slots]), min_size=1, max_size=4)
    subset = lambda items: st.lists(st.sampled_from(items), min_size=1, max_size=5)  # noqa: E731
    label = st.text("abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=10)
    domain = st.tuples(label, st.sampled_from(["org", "com", "Example.NET"])).map(
        lambda t: f"{t[0]}.{t[1]}"
    )
    source = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=20)
    return st.one_of(
        st.builds(
            lambda op, v: {"field": "ticket", "op": op, "value": v},
            st.sampled_from(["in", "not_in"]),
            ids,
        ),
        st.builds(
            lambda op, v: {"field": "slot", "op": op, "value": v},
            st.sampled_from(["in", "not_in"]),
            slots,
        ),
        st.builds(
            lambda v: {"field": "state", "op": "in", "value": v}, subset(["draft", "open", "done"])
        ),
        st.builds(
            lambda v: {"field": "sale_status", "op": "in", "value": v},
            subset(["free", "sold", "to_pay"]),
        ),
        st.builds(
            lambda c: {
                "field": "answer",
                "op": "eq",
                "value": {"choice": c.pk, "question": w.question.pk},
            },
            st.sampled_from(w.choices),
        ),
        st.builds(
            lambda q: {"field": "answer", "op": "is_set", "value": {"question": q.pk}},
            st.sampled_from([w.question, w.text_question]),
        ),
        st.builds(
            lambda op, v: {"field": "email_domain", "op": op, "value": v},
            st.sampled_from(["in", "not_in"]),
            st.lists(domain, min_size=1, max_size=3),
        ),
        st.builds(
            lambda f, op: {"field": f, "op": op, "value": None},
            st.sampled_from(["company_name", "partner"]),
            st.sampled_from(["is_set", "is_not_set"]),
        ),
        st.builds(
            lambda v: {"field": "utm_source", "op": "in", "value": v},
            st.lists(source.filter(lambda s: 0 < len(s.strip()) <= 128), min_size=1, max_size=3),
        ),
    )


@pytest.mark.django_db
def test_property_generated_valid_rules_round_trip_unchanged(world, actor):
    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        predicates=st.lists(_valid_predicates(world), max_size=5),
        basis=st.sampled_from(["attendee", "order"]),
        trigger=st.sampled_from(["create", "confirm", "done"]),
    )
    def round_trip(predicates, basis, trigger):
        rule = services.create_rule(
            name="generated",
            lead_creation_basis=basis,
            lead_creation_trigger=trigger,
            lead_type="lead",
            event=world.event,
            predicates=predicates,
            actor=actor,
        )
        read = services.predicates_of(rule)
        scope = vocabulary.scope_of(event=world.event)
        assert vocabulary.validate_predicates(read, scope=scope) == read  # accepts its output
        rows = list(rule.predicates.order_by("pk").values_list("pk", "field", "op", "value"))
        audit = EventAuditLog.objects.count()
        services.update_rule(rule=rule, predicates=read, actor=actor)
        assert services.predicates_of(LeadRule.objects.get(pk=rule.pk)) == read
        assert (
            list(rule.predicates.order_by("pk").values_list("pk", "field", "op", "value")) == rows
        )
        assert EventAuditLog.objects.count() == audit

    round_trip()
