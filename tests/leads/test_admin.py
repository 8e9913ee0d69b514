"""The leads admin: the rule editor on the closed vocabulary (a bad predicate is refused next to
its field; saves go through the services), the "generate leads" actions on rules and events,
and the leads shown per event and per registration."""

from __future__ import annotations

import json

import pytest

from events.models import EventAuditLog
from events.services import registrations as registration_services
from leads import services
from leads.models import LeadRequest, LeadRule, LeadRulePredicate

ADD = "/admin/leads/leadrule/add/"


def rule_form(world, predicates, **fields) -> dict:
    data = {
        "name": "Editor rule",
        "active": "on",
        "lead_creation_basis": "attendee",
        "lead_creation_trigger": "confirm",
        "lead_type": "lead",
        "event": str(world.event.pk),
        "team_ref": "",
        "user_ref": "",
        "tag_refs": "[]",
        "predicates-TOTAL_FORMS": str(len(predicates)),
        "predicates-INITIAL_FORMS": "0",
        "predicates-MIN_NUM_FORMS": "0",
        "predicates-MAX_NUM_FORMS": "1000",
        **fields,
    }
    for i, (field, op, value) in enumerate(predicates):
        data[f"predicates-{i}-field"] = field
        data[f"predicates-{i}-op"] = op
        data[f"predicates-{i}-value"] = "" if value is None else json.dumps(value)
    return data


@pytest.mark.django_db
def test_the_editor_explains_the_vocabulary(admin_client, world):
    page = admin_client.get(ADD).content.decode()
    for field in ("ticket", "slot", "state", "sale_status", "answer", "email_domain", "utm_source"):
        assert f"<code>{field}</code>" in page
    assert "is_not_set" in page


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("predicate", "part"),
    [
        (("state", "in", ["cancel"]), "value"),
        (("state", "not_in", ["open"]), "op"),
        (("ticket", "in", "other-event"), "value"),
        (("company_name", "is_set", "Acme"), "value"),
        (("utm_source", "in", ["news\x00letter"]), "value"),
    ],
)
def test_a_bad_predicate_is_refused_next_to_its_field_and_nothing_is_saved(
    admin_client, world, predicate, part
):
    field, op, value = predicate
    if value == "other-event":
        value = [world.other_ticket.pk]
    audit = EventAuditLog.objects.count()
    response = admin_client.post(
        ADD, rule_form(world, [("state", "in", ["open"]), (field, op, value)])
    )
    assert response.status_code == 200  # the form again, with the error
    formset = next(
        f for f in response.context["inline_admin_formsets"] if f.formset.prefix == "predicates"
    ).formset
    assert formset.forms[0].errors == {}
    errors = formset.forms[1].errors
    assert list(errors) == [part]
    assert errors[part][0].startswith("invalid_predicate")
    assert LeadRule.objects.count() == 0 and LeadRulePredicate.objects.count() == 0
    assert EventAuditLog.objects.count() == audit


@pytest.mark.django_db
def test_a_rule_is_saved_through_the_services_in_canonical_form(admin_client, world):
    tickets = [world.tickets[1].pk, world.tickets[0].pk]
    response = admin_client.post(
        ADD,
        rule_form(
            world,
            [("ticket", "in", tickets), ("email_domain", "not_in", ["Example.ORG"])],
            tag_refs='["vip"]',
        ),
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    rule = LeadRule.objects.get()
    assert services.predicates_of(rule) == [
        {"field": "ticket", "op": "in", "value": sorted(tickets)},
        {"field": "email_domain", "op": "not_in", "value": ["example.org"]},
    ]
    assert rule.tag_refs == ["vip"]
    created = EventAuditLog.objects.get(verb="lead_rule.created")
    assert created.data["rule"] == rule.pk

    # edit: drop the first predicate, change the name
    change = f"/admin/leads/leadrule/{rule.pk}/change/"
    rows = list(rule.predicates.all())
    data = rule_form(world, [], name="Renamed", tag_refs='["vip"]')
    data.update(
        {
            "predicates-TOTAL_FORMS": "2",
            "predicates-INITIAL_FORMS": "2",
            "predicates-0-id": str(rows[0].pk),
            "predicates-0-rule": str(rule.pk),
            "predicates-0-field": "ticket",
            "predicates-0-op": "in",
            "predicates-0-value": json.dumps(sorted(tickets)),
            "predicates-0-DELETE": "on",
            "predicates-1-id": str(rows[1].pk),
            "predicates-1-rule": str(rule.pk),
            "predicates-1-field": "email_domain",
            "predicates-1-op": "not_in",
            "predicates-1-value": json.dumps(["example.org"]),
        }
    )
    response = admin_client.post(change, data)
    assert response.status_code == 302, response.content.decode()[:2000]
    rule.refresh_from_db()
    assert rule.name == "Renamed"
    assert services.predicates_of(rule) == [
        {"field": "email_domain", "op": "not_in", "value": ["example.org"]}
    ]
    updated = EventAuditLog.objects.get(verb="lead_rule.updated")
    assert set(updated.data) == {"rule", "name", "predicates"}


@pytest.mark.django_db
def test_generate_leads_actions_on_rules_and_events(admin_client, world, actor):
    rule = services.create_rule(
        name="r",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        event=world.event,
        actor=actor,
    )
    registration_services.register(
        event=world.event, ticket=world.tickets[0], attendees=[{"name": "Ada"}], actor=actor
    )
    LeadRequest.objects.all().delete()
    admin_client.post(
        "/admin/leads/leadrule/",
        {"action": "generate_leads", "_selected_action": [str(rule.pk)]},
    )
    request = LeadRequest.objects.get(event=world.event)
    assert (request.cursor, list(request.rules.all())) == (0, [rule])

    admin_client.post(
        "/admin/events/event/",
        {"action": "generate_leads_for_events", "_selected_action": [str(world.event.pk)]},
    )
    request = LeadRequest.objects.get(event=world.event)
    assert list(request.rules.all()) == []  # the event action walks every rule
    assert EventAuditLog.objects.filter(verb="lead_request.queued").count() == 2


@pytest.mark.django_db
def test_leads_show_per_event_and_per_registration(admin_client, world, actor):
    services.create_rule(
        name="Per attendee",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        event=world.event,
        actor=actor,
    )
    (reg,) = registration_services.register(
        event=world.event,
        ticket=world.tickets[0],
        attendees=[{"name": "Ada", "email": "ada@example.org"}],
        actor=actor,
    )
    services.run_pass()
    from leads import selectors

    (provenance,) = selectors.leads_for_registration(reg)
    page = admin_client.get(f"/admin/events/event/{world.event.pk}/change/").content.decode()
    assert provenance.lead_ref in page and "Per attendee" in page
    listing = admin_client.get(
        "/admin/leads/leadprovenanceregistration/", {"q": "ada@example.org"}
    ).content.decode()
    assert provenance.lead_ref in listing
    changelist = admin_client.get("/admin/events/event/").content.decode()
    assert "leads" in changelist


def _queries(admin_client, url: str) -> int:
    """Statements of one load of an admin page."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as ctx:
        page = admin_client.get(url)
    assert page.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.django_db
def test_the_event_changelist_lead_column_costs_the_same_for_more_events(admin_client, world):
    from tests.leads.factories import LeadProvenanceFactory

    LeadProvenanceFactory(event=world.event)
    few = _queries(admin_client, "/admin/events/event/")
    for event in (world.other, *[LeadProvenanceFactory().event for _ in range(3)]):
        LeadProvenanceFactory(event=event)
    assert _queries(admin_client, "/admin/events/event/") == few


@pytest.mark.django_db
def test_the_local_sinks_leads_are_shown_read_only_in_the_admin(admin_client, world, actor):
    services.create_rule(
        name="Per order",
        lead_creation_basis="order",
        lead_creation_trigger="create",
        lead_type="opportunity",
        event=world.event,
        actor=actor,
    )
    registration_services.register(
        event=world.event,
        ticket=world.tickets[0],
        attendees=[{"name": "Ada", "email": "ada@example.org"}],
        sale_order_ref="SO-7",
        actor=actor,
    )
    services.run_pass()
    from leads.models import Lead

    (lead,) = Lead.objects.all()
    listing = admin_client.get("/admin/leads/lead/")
    assert listing.status_code == 200
    assert "Lead Summit – Ada" in listing.content.decode()
    page = admin_client.get(f"/admin/leads/lead/{lead.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "1. Ada (ada@example.org)" in html and "Opportunity" in html
    assert admin_client.get("/admin/leads/lead/add/").status_code == 403  # written by the pass


@pytest.mark.django_db
def test_the_leads_per_registration_list_costs_the_same_for_more_rows(admin_client, world):
    from tests.leads.factories import LeadProvenanceRegistrationFactory

    url = "/admin/leads/leadprovenanceregistration/"
    LeadProvenanceRegistrationFactory()
    few = _queries(admin_client, url)
    LeadProvenanceRegistrationFactory.create_batch(4)
    assert _queries(admin_client, url) == few
