"""The lead pass: triggers, bases, dedup (twice in sequence makes each lead once),
a sink that raises, the limits and re-arming, the description, relink; and the core hook that
queues the work inside the registration transaction."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from datetime import timedelta
from unittest import mock

import psycopg
import pytest
from django.db import connection, transaction
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from events.errors import DomainError
from events.models import EventAuditLog, Registration
from events.services import nudge
from events.services import registrations as registration_services
from leads import services
from leads.adapters import LocalLeadSink
from leads.models import Lead, LeadProvenance, LeadProvenanceRegistration, LeadRequest
from leads.services import passes, requests
from tests.events import factories


def rule(world, actor, *, basis="attendee", trigger="create", predicates=(), **more):
    return services.create_rule(
        name=more.pop("name", f"{basis}/{trigger}"),
        lead_creation_basis=basis,
        lead_creation_trigger=trigger,
        lead_type=more.pop("lead_type", "lead"),
        event=more.pop("event", world.event),
        predicates=list(predicates),
        actor=actor,
        **more,
    )


def register(world, actor, *names, state="open", order=None, partner=None, **more):
    event = more.pop("event", world.event)
    default_ticket = world.tickets[0] if event == world.event else world.other_ticket
    more.setdefault("ticket", default_ticket)
    return registration_services.register(
        event=event,
        attendees=[
            {"name": n, "email": f"{n.lower()}@example.org", **more.pop("attendee", {})}
            for n in names
        ],
        state=state,
        sale_order_ref=order,
        partner_ref=partner,
        actor=actor,
        **more,
    )


def pairs() -> Counter:
    return Counter(LeadProvenanceRegistration.objects.values_list("rule_id", "registration_id"))


# --- the hook ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_any_write_of_registrations_queues_the_events_request_in_its_transaction(world, actor):
    """The overlay's triggers (migration 0005) follow the table, not a verb: a registration
    inserted by hand, outside every service, lowers the request's cursor below it and makes it
    cover every rule; an UPDATE that changes no state leaves the request alone; one that changes
    a state lowers the cursor again."""
    (first,) = register(world, actor, "Ada")
    request = LeadRequest.objects.get(event=world.event)
    assert request.cursor == first.pk - 1
    LeadRequest.objects.filter(pk=request.pk).update(cursor=first.pk + 100)
    request.rules.add(rule(world, actor))
    (second,) = Registration.objects.bulk_create(
        [Registration(event=world.event, name="By hand", barcode="4242", state="draft")]
    )
    request.refresh_from_db()
    assert request.cursor == second.pk - 1  # lowered below the new registration
    assert list(request.rules.all()) == []  # a registration change concerns every rule

    LeadRequest.objects.filter(pk=request.pk).update(cursor=second.pk + 100)
    Registration.objects.filter(pk=first.pk).update(name="Ada L.")  # no state changed
    assert LeadRequest.objects.get(pk=request.pk).cursor == second.pk + 100
    Registration.objects.filter(pk=first.pk).update(state="cancel")
    assert LeadRequest.objects.get(pk=request.pk).cursor == first.pk - 1


@pytest.mark.django_db
def test_a_booking_writes_the_request_inside_its_events_book_call(world, actor):
    """The trigger runs inside the booking's one call: no statement of the overlay's own, and
    the request is written all the same."""
    with CaptureQueriesContext(connection) as ctx:
        (first,) = register(world, actor, "Ada")
    assert not [q for q in ctx.captured_queries if "lead" in q["sql"].lower()]
    assert [q["sql"] for q in ctx.captured_queries if "events_book(" in q["sql"]]
    assert LeadRequest.objects.get(event=world.event).cursor == first.pk - 1


@pytest.mark.django_db
def test_a_draft_booking_queues_too_and_the_pass_is_nudged_after_commit(
    world, actor, django_capture_on_commit_callbacks
):
    """A draft takes no seat; the trigger writes the request all the same, and the hook nudges
    the pass once the booking committed. A second draft finds the request covering it: the
    request is left unwritten (no new row version)."""
    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
    ):
        (draft,) = register(world, actor, "Ada", state="draft")
    assert LeadRequest.objects.get(event=world.event).cursor == draft.pk - 1
    assert [c.args[:2] for c in sent.call_args_list] == [(requests.NUDGE_KEY, requests.PASS_TASK)]

    version = request_version(world.event)  # covered now: the next draft leaves it unwritten
    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
    ):
        register(world, actor, "Bea", state="draft")
    assert request_version(world.event) == version
    sent.assert_not_called()


@pytest.mark.parametrize(
    "owned",
    [
        pytest.param(False, marks=pytest.mark.django_db, id="savepoint"),
        # the booking opens its own transaction (the case of a real request)
        pytest.param(True, marks=pytest.mark.django_db(transaction=True), id="own-transaction"),
    ],
)
def test_a_refused_booking_leaves_the_request_as_it_was_and_nudges_nobody(
    world, actor, django_capture_on_commit_callbacks, owned
):
    event = factories.EventFactory(seats_limited=True, seats_max=1)
    (first,) = registration_services.register(event=event, attendees=[{"name": "A"}], actor=actor)
    LeadRequest.objects.filter(event=event).update(
        lease_holder="walker", lease_until=timezone.now() + timedelta(minutes=5)
    )  # a held request is always rewritten: only the refusal can keep it as it is
    version = request_version(event)
    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
        pytest.raises(DomainError) as refused,
    ):
        registration_services.register(event=event, attendees=[{"name": "B"}], actor=actor)
    assert refused.value.code == "sold_out"
    assert request_version(event) == version
    assert LeadRequest.objects.get(event=event).cursor == first.pk - 1
    sent.assert_not_called()


@pytest.mark.django_db
def test_a_state_change_lowers_the_cursor_to_revisit_the_registration(world, actor):
    (reg,) = register(world, actor, "Ada", state="draft")
    LeadRequest.objects.filter(event=world.event).update(cursor=reg.pk + 50)
    registration_services.confirm(registration=reg, actor=actor)
    assert LeadRequest.objects.get(event=world.event).cursor == reg.pk - 1


@pytest.mark.parametrize(
    "owned",
    [
        pytest.param(False, marks=pytest.mark.django_db, id="savepoint"),
        # the transition is its own transaction and queues its COMMIT behind its writes (the
        # desk's scan): the nudge still waits for that COMMIT
        pytest.param(True, marks=pytest.mark.django_db(transaction=True), id="own-transaction"),
    ],
)
@pytest.mark.parametrize("refused", [False, True], ids=["committed", "refused"])
def test_a_transition_queues_the_request_and_nudges_once_only_after_its_commit(
    actor, django_capture_on_commit_callbacks, monkeypatch, owned, refused
):
    event = factories.EventFactory(seats_limited=True, seats_max=5)
    (reg,) = registration_services.register(event=event, attendees=[{"name": "A"}], actor=actor)
    LeadRequest.objects.filter(event=event).update(cursor=reg.pk + 50)  # the scan must lower it
    if refused:  # the row's statement refuses (its UPDATE made to miss the row)
        missing = registration_services.transitions._transition_sql().replace("id = %s", "id = -%s")
        monkeypatch.setattr(registration_services.transitions, "_transition_sql", lambda: missing)
    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
    ):
        if refused:
            with pytest.raises(RuntimeError, match="was not updated"):
                registration_services.mark_attended(registration=reg, actor=actor)
        else:
            registration_services.mark_attended(registration=reg, actor=actor)
    cursor = LeadRequest.objects.get(event=event).cursor
    if refused:
        assert cursor == reg.pk + 50
        sent.assert_not_called()
    else:
        assert cursor == reg.pk - 1
        assert [c.args[:2] for c in sent.call_args_list] == [
            (requests.NUDGE_KEY, requests.PASS_TASK)
        ]


def request_version(event) -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT xmin::text FROM leads_leadrequest WHERE event_id = %s", [event.pk])
        return cursor.fetchone()[0]


@pytest.mark.django_db
def test_a_request_that_already_covers_the_booking_is_left_unwritten_and_nudges_nobody(
    world, actor, django_capture_on_commit_callbacks
):
    """A ticket rush writes no new request row version per booking: the request (cursor below
    the new registration, every rule, no walker holding it) already covers it, and its pass is
    already due. The trigger that wrote nothing asks for nothing (`events.after_commit`), so
    the hook nudges nobody."""
    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
    ):
        register(world, actor, "Ada")
    assert [c.args[:2] for c in sent.call_args_list] == [(requests.NUDGE_KEY, requests.PASS_TASK)]
    version = request_version(world.event)

    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
    ):
        register(world, actor, "Bea", "Cy")
    assert request_version(world.event) == version
    sent.assert_not_called()


@pytest.mark.django_db
def test_a_request_a_walker_holds_is_rewritten_so_its_batch_is_walked_again(
    world, actor, django_capture_on_commit_callbacks
):
    """The walker's fence compares row versions (xmin): a booking during its batch must make a
    new one even when the cursor already covers the registration."""
    register(world, actor, "Ada")
    LeadRequest.objects.filter(event=world.event).update(
        lease_holder="walker", lease_until=timezone.now() + timedelta(minutes=5)
    )
    version = request_version(world.event)
    with (
        mock.patch.object(nudge, "_send") as sent,
        django_capture_on_commit_callbacks(execute=True),
    ):
        register(world, actor, "Bea")
    assert request_version(world.event) != version
    assert sent.call_count == 1


def _other_connection() -> psycopg.Connection:
    settings = connection.settings_dict
    return psycopg.connect(
        dbname=settings["NAME"],
        user=settings["USER"],
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
    )


@pytest.mark.django_db(transaction=True)
def test_an_unwritten_request_still_holds_off_a_walker_until_the_booking_commits(world, actor):
    """The hook leaves a covering request unwritten, but locks its row FOR KEY SHARE
    (`leads_cover_request`, migration 0006): a walker's claim skips the request until the
    booking commits, so no walker reads a batch missing the uncommitted registration and
    advances past it."""
    register(world, actor, "Ada")
    request = LeadRequest.objects.get(event=world.event)
    version = request_version(world.event)
    claim = {"holder": "walker", "lease": 300, "seen": []}
    with transaction.atomic():
        register(world, actor, "Bea")
        assert request_version(world.event) == version  # left unwritten
        with _other_connection() as other:
            assert other.execute(passes._CLAIM, claim).fetchone() is None  # skipped: locked
    with _other_connection() as other:
        claimed = other.execute(passes._CLAIM, claim).fetchone()
    assert claimed is not None and claimed[0] == request.pk


@pytest.mark.django_db(transaction=True)
def test_changes_to_one_events_registrations_do_not_wait_for_each_other_at_the_request(
    world, actor
):
    """Two transactions that each change a registration of the event (two desks admitting)
    both leave the covering request unwritten under KEY SHARE: the second does not wait for
    the first to commit, where an upsert's lock (ON CONFLICT DO UPDATE locks even when its
    WHERE is false) made every such change of the event wait for the one before it."""
    first, second = register(world, actor, "Ada", "Bea")
    version = request_version(world.event)
    table = Registration._meta.db_table
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {table} SET state = 'done' WHERE id = %s", [first.pk])  # noqa: S608
        assert request_version(world.event) == version
        with _other_connection() as other:
            other.execute("SET lock_timeout = '2s'")
            other.execute(f"UPDATE {table} SET state = 'done' WHERE id = %s", [second.pk])  # noqa: S608
            other.commit()
    assert request_version(world.event) == version
    assert Registration.objects.filter(pk__in=[first.pk, second.pk], state="done").count() == 2


@pytest.mark.django_db(transaction=True)
def test_a_pass_that_finds_the_request_locked_by_a_booking_comes_back_shortly(world, actor):
    """The claim skips a request a booking in flight holds (SKIP LOCKED), and that booking,
    writing nothing, nudges nobody: the pass re-arms itself with a short countdown instead of
    leaving the registrations to beat."""
    rule(world, actor)
    register(world, actor, "Ada")
    reports: list = []
    nudges: list[dict] = []

    def pass_elsewhere() -> None:
        try:
            reports.append(services.run_pass())
        finally:
            connection.close()

    with mock.patch.object(nudge, "after_commit", side_effect=lambda **k: nudges.append(k)):
        with transaction.atomic():
            register(world, actor, "Bea")  # holds the request's row until it commits
            walker = threading.Thread(target=pass_elsewhere)
            walker.start()
            walker.join(30)
    assert reports and reports[0].requests_claimed == 0 and reports[0].work_remaining
    assert nudges == [
        {
            "key": requests.NUDGE_KEY,
            "task": requests.PASS_TASK,
            "countdown": passes.LOCKED_RETRY_SECONDS,
        }
    ]
    after = services.run_pass()  # the nudged pass, once the booking committed
    assert (after.registrations_walked, after.leads_created) == (2, 2)


# --- triggers ---------------------------------------------------------------------------------


@pytest.mark.django_db
def test_triggers_fire_only_for_eligible_states_and_all_matching_rules_apply(world, actor):
    on_create = rule(world, actor, trigger="create")
    on_confirm = rule(world, actor, trigger="confirm")
    on_done = rule(world, actor, trigger="done")
    vip_only = rule(
        world,
        actor,
        trigger="create",
        name="vip",
        predicates=[{"field": "ticket", "op": "in", "value": [world.tickets[1].pk]}],
    )
    (draft,) = register(world, actor, "Draft", state="draft", ticket=world.tickets[0])
    (open_,) = register(world, actor, "Open", ticket=world.tickets[1])
    (done,) = register(world, actor, "Done", ticket=world.tickets[0])
    (cancelled,) = register(world, actor, "Cancelled", ticket=world.tickets[1])
    registration_services.mark_attended(registration=done, actor=actor)
    registration_services.cancel(registration=cancelled, actor=actor)

    services.run_pass()

    assert set(pairs()) == {
        (on_create.pk, draft.pk),
        (on_create.pk, open_.pk),
        (on_create.pk, done.pk),
        (on_confirm.pk, open_.pk),
        (on_confirm.pk, done.pk),
        (on_done.pk, done.pk),
        (vip_only.pk, open_.pk),
    }

    # confirming the draft later fires the confirm rule for it, and nothing twice
    registration_services.confirm(registration=draft, actor=actor)
    services.run_pass()
    assert (on_confirm.pk, draft.pk) in pairs()
    assert set(pairs().values()) == {1}


@pytest.mark.django_db
def test_a_rule_of_another_event_or_inactive_does_not_apply(world, actor):
    elsewhere = rule(world, actor, event=world.other)
    inactive = rule(world, actor, name="off")
    services.update_rule(rule=inactive, active=False, actor=actor)
    everywhere = rule(world, actor, event=None, name="all events")
    typed = services.create_rule(
        name="typed",
        lead_creation_basis="attendee",
        lead_creation_trigger="create",
        lead_type="lead",
        event_types=[world.event.event_type],
        actor=actor,
    )
    (reg,) = register(world, actor, "Ada")
    services.run_pass()
    assert set(pairs()) == {(everywhere.pk, reg.pk), (typed.pk, reg.pk)}
    assert elsewhere.pk and inactive.pk


# --- bases ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_attendee_basis_makes_one_lead_per_registration(world, actor):
    r = rule(world, actor, basis="attendee")
    regs = register(world, actor, "Ada", "Grace", order="SO-1")
    services.run_pass()
    provenance = LeadProvenance.objects.filter(rule=r)
    assert provenance.count() == 2 == Lead.objects.count()
    assert {p.group_key for p in provenance} == {f"registration:{x.pk}" for x in regs}


@pytest.mark.django_db
def test_order_basis_makes_one_lead_per_order_and_a_later_registration_updates_it(world, actor):
    r = rule(world, actor, basis="order", lead_type="opportunity")
    register(world, actor, "Ada", "Grace", order="SO-1")
    report = services.run_pass()
    assert (report.leads_created, report.leads_updated) == (1, 0)
    (lead,) = Lead.objects.all()
    before = lead.description
    assert "Ada" in before and "Grace" in before

    (alan,) = register(world, actor, "Alan", order="SO-1")
    report = services.run_pass()
    assert (report.leads_created, report.leads_updated) == (0, 1)
    (lead,) = Lead.objects.all()  # no second lead
    assert lead.description.startswith(before)  # appended
    assert lead.description[len(before) :] == "\n3. Alan (alan@example.org)"
    (provenance,) = LeadProvenance.objects.filter(rule=r)
    assert provenance.group_key == "order:SO-1"
    assert provenance.registration_rows.count() == 3
    assert lead.lead_type == "opportunity"
    assert alan.pk in provenance.registration_rows.values_list("registration_id", flat=True)


@pytest.mark.django_db
def test_order_basis_groups_by_partner_without_an_order_else_per_registration(world, actor):
    rule(world, actor, basis="order")
    register(world, actor, "Ada", partner="P-1")
    register(world, actor, "Grace", partner="P-1")
    register(world, actor, "Alan")
    services.run_pass()
    assert sorted(LeadProvenance.objects.values_list("group_key", flat=True))[0] == "partner:P-1"
    assert LeadProvenance.objects.count() == 2
    assert Lead.objects.count() == 2


# --- twice in sequence ----------------------------------------------------------------------


@pytest.mark.django_db
def test_running_the_pass_twice_makes_each_lead_once(world, actor):
    rules = [rule(world, actor, basis=b, name=b) for b in ("attendee", "order")]
    register(world, actor, "Ada", "Grace", order="SO-1")
    register(world, actor, "Alan")
    services.run_pass()
    services.generate_leads(event=world.event, actor=actor)  # walk everything again
    report = services.run_pass()
    assert (report.leads_created, report.leads_updated) == (0, 0)
    assert report.registrations_walked == 3
    assert set(pairs().values()) == {1}
    assert len(pairs()) == 6
    assert Lead.objects.count() == 3 + 2
    assert LeadRequest.objects.count() == 0  # finished requests are deleted
    assert rules


# --- a sink that raises -----------------------------------------------------------------------


class BrokenSink(LocalLeadSink):
    calls = 0

    def upsert_leads(self, *, items):
        type(self).calls += 1
        raise ConnectionError("CRM down")


@pytest.mark.django_db
def test_a_raising_sink_parks_the_request_with_audit_and_log_and_the_cursor_stays(
    world, actor, caplog
):
    rule(world, actor)
    regs = register(world, actor, "Ada", "Grace")
    other_rule = rule(world, actor, event=world.other, name="other")
    (other_reg,) = register(world, actor, "Alan", event=world.other)
    request = LeadRequest.objects.get(event=world.event)
    cursor = request.cursor
    audit_before = EventAuditLog.objects.count()

    with caplog.at_level(logging.ERROR, logger="leads.pass"):
        report = services.run_pass(sink=BrokenSink())
    assert report.parked == 2  # both events' requests; the pass went on
    request.refresh_from_db()
    assert request.cursor == cursor
    assert request.error_message == "[ConnectionError] CRM down"
    assert request.lease_until is None
    assert Lead.objects.count() == 0 and LeadProvenance.objects.count() == 0
    parked = EventAuditLog.objects.filter(verb="lead_request.parked", event=world.event)
    assert parked.count() == 1
    assert parked.get().data["code"] == "ConnectionError"
    assert EventAuditLog.objects.count() == audit_before + 2
    assert any("parked in error" in r.message for r in caplog.records)
    assert report.work_remaining is False  # a parked request waits for beat, no nudge loop

    # the same error again: no second audit row
    services.run_pass(sink=BrokenSink())
    assert parked.count() == 1

    # the sink recovers: the pass completes
    report = services.run_pass()
    assert report.parked == 0
    assert set(pairs()) == {(r.pk, x.pk) for r in [other_rule] for x in [other_reg]} | {
        (p.rule_id, x.pk)
        for p in LeadProvenance.objects.filter(event=world.event)
        for x in regs
        if x.pk in p.registration_rows.values_list("registration_id", flat=True)
    }
    assert Lead.objects.count() == 3
    assert LeadRequest.objects.count() == 0
    assert EventAuditLog.objects.filter(verb="lead_request.recovered").count() == 2


@pytest.mark.django_db
def test_an_unwired_sink_parks_with_port_not_wired(world, actor):
    rule(world, actor)
    register(world, actor, "Ada")
    with override_settings(EVENT_LEAD_SINK="events.ports.RefusingLeadSink"):
        report = services.run_pass()
    assert report.parked == 1
    assert LeadRequest.objects.get().error_message.startswith("[port_not_wired]")


# --- limits and re-arming ----------------------------------------------------------------------


@pytest.mark.django_db
def test_batch_and_pass_limits_are_honoured_and_a_stopped_pass_rearms(world, actor):
    rule(world, actor)
    regs = register(world, actor, *[f"Guest{i}" for i in range(7)])
    with (
        override_settings(EVENT_LEAD_BATCH=2, EVENT_LEAD_CRON_LIMIT=5),
        mock.patch.object(nudge, "after_commit") as nudged,
        mock.patch.object(passes, "_batch", wraps=passes._batch) as batches,
    ):
        first = services.run_pass()
        assert [
            c.kwargs["limit"] if "limit" in c.kwargs else c.args[2] for c in batches.call_args_list
        ] == [2, 2, 1]
        assert (first.registrations_walked, first.leads_created) == (5, 5)
        assert first.work_remaining is True
        nudged.assert_called_once_with(key="leads:nudge:lead-pass", task="leads.run_pass")
        request = LeadRequest.objects.get()
        assert request.cursor == regs[4].pk
        assert request.lease_until is None  # released for the next pass

        nudged.reset_mock()
        second = services.run_pass()
        assert (second.registrations_walked, second.leads_created) == (2, 2)
        assert second.work_remaining is False
        nudged.assert_not_called()
    assert LeadRequest.objects.count() == 0
    assert Lead.objects.count() == 7


@pytest.mark.django_db
def test_statements_per_batch_do_not_grow_with_the_batch(world, actor):
    rule(world, actor)
    rule(world, actor, basis="order", name="order")
    question = world.text_question

    def statements(n: int) -> int:
        register(
            world,
            actor,
            *[f"G{n}x{i}" for i in range(n)],
            order=f"SO-{n}",
            attendee={"answers": {str(question.pk): "tea"}},
        )
        with (
            override_settings(EVENT_LEAD_BATCH=1000),
            CaptureQueriesContext(connection) as ctx,
        ):
            report = services.run_pass()
        assert report.registrations_walked == n
        return len(ctx.captured_queries)

    assert statements(3) == statements(30)


# --- description and relink ----------------------------------------------------------------


@pytest.mark.django_db
def test_the_description_lists_participants_with_their_answers(world, actor):
    rule(world, actor, basis="order", team_ref="T-1", user_ref="U-1", tag_refs=["vip"])
    register(
        world,
        actor,
        "Ada",
        order="SO-9",
        utm={"source": "newsletter"},
        attendee={
            "phone": "+32 2 555 01 23",
            "company_name": "Engines",
            "answers": {
                str(world.question.pk): world.choices[1].pk,
                str(world.text_question.pk): "vegetarian",
            },
        },
    )
    register(world, actor, "Grace", order="SO-9")
    services.run_pass()
    (lead,) = Lead.objects.all()
    assert lead.description == (
        "Participants\n"
        "1. Ada (ada@example.org, +3225550123)\n"
        "   - Company size: 11+\n"
        "   - Dietary needs: vegetarian\n"
        "2. Grace (grace@example.org)"
    )
    assert lead.name == "Lead Summit – Ada"
    assert (lead.team_ref, lead.user_ref, lead.tag_refs) == ("T-1", "U-1", ["vip"])
    assert lead.utm == {"source": "newsletter"}
    assert (lead.email, lead.company_name, lead.event_id) == (
        "ada@example.org",
        "Engines",
        world.event.pk,
    )


@pytest.mark.django_db
def test_relink_repoints_provenance(world, actor):
    rule(world, actor)
    rule(world, actor, basis="order", name="order")
    register(world, actor, "Ada", order="SO-1")
    services.run_pass()
    old = LeadProvenance.objects.order_by("pk").first().lead_ref
    other = LeadProvenance.objects.exclude(lead_ref=old).get().lead_ref
    assert services.relink(old_lead_ref=old, new_lead_ref="crm:42") == 1
    assert sorted(LeadProvenance.objects.values_list("lead_ref", flat=True)) == sorted(
        ["crm:42", other]
    )
    assert EventAuditLog.objects.filter(verb="lead.relinked", event=world.event).count() == 1
    assert services.relink(old_lead_ref=old, new_lead_ref="crm:43") == 0


@pytest.mark.django_db
def test_lead_pass_command_prints_the_report(world, actor, capsys):
    from django.core.management import call_command

    rule(world, actor)
    register(world, actor, "Ada", "Grace")
    call_command("lead_pass")
    out = capsys.readouterr().out
    assert "requests claimed: 1" in out
    assert "registrations walked: 2" in out
    assert "leads created: 2" in out
    assert "leads updated: 0" in out
    assert "parked: 0" in out


@pytest.mark.django_db
def test_generate_leads_merges_rule_subsets(world, actor):
    a, b = rule(world, actor, name="a"), rule(world, actor, name="b")
    factories.RegistrationFactory(event=world.event)
    LeadRequest.objects.all().delete()  # the registration's own (all rules): generate_leads alone
    (request,) = services.generate_leads(rule=a, actor=actor)
    assert list(request.rules.all()) == [a]
    services.generate_leads(rule=b, actor=actor)
    assert set(LeadRequest.objects.get().rules.all()) == {a, b}
    services.generate_leads(event=world.event, actor=actor)
    assert list(LeadRequest.objects.get().rules.all()) == []  # all rules
    services.generate_leads(rule=a, actor=actor)
    assert list(LeadRequest.objects.get().rules.all()) == []  # "all" stays all
    assert LeadRequest.objects.get().cursor == 0


@pytest.mark.django_db
def test_one_statement_for_several_events_covers_every_events_request(world, actor):
    """A single INSERT (or UPDATE) of registrations of several events: the trigger covers each
    event's request, none skipped once one was written."""
    other = factories.EventFactory()
    first, second = Registration.objects.bulk_create(
        [
            Registration(event=world.event, name="A", barcode="5151", state="draft"),
            Registration(event=other, name="B", barcode="5252", state="draft"),
        ]
    )
    cursors = dict(LeadRequest.objects.values_list("event_id", "cursor"))
    assert cursors == {world.event.pk: first.pk - 1, other.pk: second.pk - 1}

    LeadRequest.objects.update(cursor=second.pk + 100)
    Registration.objects.filter(pk__in=[first.pk, second.pk]).update(state="cancel")
    cursors = dict(LeadRequest.objects.values_list("event_id", "cursor"))
    assert cursors == {world.event.pk: first.pk - 1, other.pk: second.pk - 1}


@pytest.mark.django_db(transaction=True)
def test_a_writer_without_the_event_lock_waits_for_a_booking_instead_of_deadlocking(actor):
    """The lock order of request rows (Event rows first) holds for a writer that took no Event
    lock: its trigger takes FOR KEY SHARE on the event before the request. Without that, such
    a writer H locks the request; a booking B locks the Event row and its trigger waits for the
    request; H's COMMIT checks its registration's foreign key (FOR KEY SHARE on the Event row,
    held by B): a deadlock."""
    import threading
    import time

    import psycopg

    from tests.helpers import database_url

    event = factories.EventFactory()
    (seed,) = registration_services.register(event=event, attendees=[{"name": "S"}], actor=actor)
    copy = (
        "INSERT INTO events_registration OVERRIDING USER VALUE"
        " SELECT (jsonb_populate_record(NULL::events_registration,"
        "         to_jsonb(r) || jsonb_build_object('barcode', %s::text))).*"
        "   FROM events_registration r WHERE r.id = %s"
    )
    errors: list[BaseException] = []
    booker_pid: list[int] = []

    def booking() -> None:  # the booking's order: the Event row, then its rows
        try:
            with psycopg.connect(database_url()) as b:
                booker_pid.append(b.info.backend_pid)
                b.execute("SELECT 1 FROM events_event WHERE id = %s FOR UPDATE", [event.pk])
                b.execute(copy, ["9000000002", seed.pk])
                b.commit()
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    with psycopg.connect(database_url()) as h:  # no Event lock of its own
        h.execute(copy, ["9000000001", seed.pk])
        thread = threading.Thread(target=booking)
        thread.start()
        deadline = time.monotonic() + 20
        with psycopg.connect(database_url(), autocommit=True) as watcher:
            while not (
                booker_pid
                and watcher.execute(
                    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)",
                    [booker_pid[0]],
                ).fetchone()[0]
            ):
                assert time.monotonic() < deadline, "the booking never waited"
                time.sleep(0.01)  # polling another backend's locks, with a deadline
        h.commit()
        thread.join(30)
    assert errors == []
    assert set(Registration.objects.filter(event=event).values_list("barcode", flat=True)) >= {
        "9000000001",
        "9000000002",
    }
