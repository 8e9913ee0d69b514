"""The event dashboard (events.admin.dashboard): each figure equals an independent count on the
seeded demo event, the SVG charts parse as XML with the expected series and no script, the
query count does not grow with registrations (10 vs 5,000), the desk group sees it read-only.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zoneinfo
from collections import Counter
from datetime import timedelta
from html import escape

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.models import Q
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from booths.models import Booth, BoothState
from events.models import (
    Event,
    EventAuditLog,
    Mail,
    MailOutbox,
    MailOutcome,
    MailRegistration,
    OutboxState,
    Registration,
    RegistrationState,
    SeatLedger,
)
from events.read import dashboard as figures
from events.services import seats
from leads.models import LeadProvenance
from seams.models import InboxStatus, SeamInbox
from sms.models import SmsOutbox, SmsState
from tests.booths.factories import BoothFactory
from tests.events import factories
from tests.leads.factories import LeadProvenanceFactory
from tests.seams.factories import SeamInboxFactory
from tests.sms.factories import SmsOutboxFactory

# Every test runs on the demo data, seeded once for the module (tests/conftest.py demo_data).
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("demo_data")]
SVG = re.compile(r"<svg\b.*?</svg>", re.S)
HOLDING = (RegistrationState.OPEN, RegistrationState.DONE)


def url(event) -> str:
    return reverse("admin:events_event_dashboard", args=[event.pk])


def user_in(group: str, name: str):
    user = factories.UserFactory(username=name)
    user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def summit():
    event = Event.objects.get(name="Open Source Summit")
    reg = Registration.objects.filter(event=event, state=RegistrationState.OPEN).first()
    mail = Mail.objects.filter(event=event).first()
    # Rows the dashboard lists as alerts: a failed mail, a failed SMS, a parked seam message.
    MailOutbox.objects.create(
        idempotency_key="dash-failed-1",
        message_id="<dash-failed-1@test>",
        scheduler=mail,
        registration=reg,
        recipient=reg.email,
        subject="x",
        body_text="x",
        state=OutboxState.FAILED,
        next_attempt_at=timezone.now(),
        last_error="550 no such user",
    )
    SmsOutboxFactory(registration=reg, state=SmsState.FAILED, last_error="invalid number")
    SeamInboxFactory(status=InboxStatus.PARKED, error_code="unknown_reference")
    LeadProvenanceFactory(event=event)
    return event


@pytest.fixture
def manager():
    return user_in("Event manager", "boss")


def page(client, user, event):
    client.force_login(user)
    response = client.get(url(event))
    assert response.status_code == 200
    return response


def test_seat_figures_equal_the_registrations(client, manager, summit):
    response = page(client, manager, summit)
    seat = response.context["seat"]
    holding = Registration.objects.filter(event=summit, active=True, state__in=HOLDING)
    assert seat.taken == holding.count() > 20
    by_ticket = Counter(holding.values_list("ticket__name", flat=True))
    event_left = summit.seats_max - holding.count()
    for ticket in summit.tickets.all():
        (bar,) = [b for b in seat.per_ticket if b.label == ticket.name]
        assert bar.taken == by_ticket[ticket.name]
        own = ticket.seats_max - by_ticket[ticket.name] if ticket.seats_max else None
        expected = event_left if own is None else min(own, event_left)
        assert bar.available == expected
    assert seat.per_slot == []  # a single-slot event
    html = response.content.decode()
    assert f'data-figure="seats-taken">{holding.count()}<' in html


def test_seat_figures_per_slot_on_a_multi_slot_event(client, manager):
    event = Event.objects.get(name="Hands-on Django Workshops")
    seat = page(client, manager, event).context["seat"]
    holding = Registration.objects.filter(event=event, active=True, state__in=HOLDING)
    assert len(seat.per_slot) == event.slots.count() == 3
    for slot, bar in zip(event.slots.order_by("start_datetime"), seat.per_slot, strict=True):
        taken = holding.filter(slot=slot).count()
        assert (bar.label, bar.taken) == (str(slot), taken)
        assert bar.available == event.seats_max - taken


def test_registrations_per_day_equal_the_rows(client, manager, summit):
    days = page(client, manager, summit).context["days"]
    tz = zoneinfo.ZoneInfo(summit.date_tz)
    created = Registration.objects.filter(event=summit).values_list("created_at", flat=True)
    counted = Counter(timezone.localtime(c, tz).date() for c in created)
    assert len(counted) >= 10  # the seed spreads them over two weeks
    assert {d.day: d.daily for d in days if d.daily} == dict(counted)
    assert days[-1].cumulative == Registration.objects.filter(event=summit).count()
    assert all(b.day - a.day == timedelta(days=1) for a, b in zip(days, days[1:], strict=False))


def test_check_in_equals_the_attended_rows(client, manager, summit):
    response = page(client, manager, summit)
    check_in = response.context["check_in"]
    active = Registration.objects.filter(event=summit, active=True)
    attended = active.filter(state=RegistrationState.DONE).count()
    assert attended >= 5  # the seed checks some in
    assert (check_in.attended, check_in.expected) == (
        attended,
        active.filter(state__in=HOLDING).count(),
    )
    states = response.context["states"]
    for state in RegistrationState.values:
        assert states[state] == active.filter(state=state).count()


def test_communication_counts_each_scheduler(client, manager, summit):
    statuses = page(client, manager, summit).context["schedulers"]
    assert {s.scheduler.pk for s in statuses} == set(
        Mail.objects.filter(event=summit).values_list("pk", flat=True)
    )
    for status in statuses:
        rows = MailRegistration.objects.filter(scheduler=status.scheduler, mail_sent=True)
        if status.scheduler.interval_type == "after_sub":
            assert status.sent == rows.filter(outcome=MailOutcome.SENT).count()
            assert status.skipped == rows.exclude(outcome=MailOutcome.SENT).count()
            due = MailRegistration.objects.filter(scheduler=status.scheduler, mail_sent=False)
            first = due.order_by("scheduled_date").first()
            assert status.next_run == (first.scheduled_date if first else None)
        else:
            assert status.next_run == status.scheduler.scheduled_date
        assert (
            status.failed
            == MailOutbox.objects.filter(
                scheduler=status.scheduler, state=OutboxState.FAILED
            ).count()
        )
        assert status.state == status.scheduler.mail_state


def test_alerts_link_to_the_failed_and_parked_rows(client, manager, summit):
    response = page(client, manager, summit)
    alerts = {a.url: a for a in response.context["alerts"]}
    failed_mails = MailOutbox.objects.filter(state=OutboxState.FAILED).filter(
        Q(registration__event=summit) | Q(scheduler__event=summit)
    )
    mail_link = (
        reverse("admin:events_mailoutbox_changelist") + f"?event={summit.pk}&state__exact=failed"
    )
    sms_link = reverse("admin:sms_smsoutbox_changelist") + f"?event={summit.pk}&state__exact=failed"
    # a failed SMS of another event: counted nowhere on this dashboard, not in its list
    SmsOutbox.objects.create(
        reference="other-event-sms",
        registration=factories.RegistrationFactory(),
        to="+32470000000",
        body="x",
        state=SmsState.FAILED,
        next_attempt_at=timezone.now(),
    )
    parked_link = reverse("admin:seams_seaminbox_changelist") + "?status__exact=parked"
    expected = {
        mail_link: failed_mails.count(),
        sms_link: SmsOutbox.objects.filter(state=SmsState.FAILED)
        .filter(Q(registration__event=summit) | Q(scheduler__event=summit))
        .count(),
        parked_link: SeamInbox.objects.filter(status=InboxStatus.PARKED).count(),
    }
    assert expected[mail_link] == 1 and expected[sms_link] >= 1 and expected[parked_link] >= 1
    html = response.content.decode()
    for link, count in expected.items():
        assert alerts[link].count == count
        assert f'href="{escape(link)}"' in html
        # the link opens the list of exactly those rows
        listed = client.get(link)
        assert listed.status_code == 200
        assert listed.context["cl"].result_count == count


def test_the_failed_mail_alert_lists_only_this_events_mails_and_they_can_be_retried(
    client, manager, summit
):
    other = factories.MailOutboxFactory(
        registration=factories.RegistrationFactory(), state=OutboxState.FAILED
    )
    client.force_login(manager)
    (alert,) = [a for a in page(client, manager, summit).context["alerts"] if "mail" in a.text]
    listed = client.get(alert.url).context["cl"]
    failed = MailOutbox.objects.filter(state=OutboxState.FAILED)
    assert failed.count() == 2 and alert.count == 1
    assert [row.pk for row in listed.result_list] == [failed.exclude(pk=other.pk).get().pk]
    # the list's "retry" action queues it again through the delivery service
    response = client.post(
        alert.url,
        {"action": "retry", "_selected_action": [row.pk for row in listed.result_list]},
    )
    assert response.status_code == 302
    retried = MailOutbox.objects.get(pk=listed.result_list[0].pk)
    assert (retried.state, retried.attempts) == (OutboxState.QUEUED, 0)
    assert EventAuditLog.objects.filter(verb="outgoing_mail.requeued", event=summit).count() == 1
    page_after = page(client, manager, summit)
    assert not [a for a in page_after.context["alerts"] if "mail" in a.text]


def test_the_page_reloads_itself_only_while_the_event_is_on(client, manager):
    now = timezone.now()
    running = factories.EventFactory(
        date_begin=now - timedelta(hours=1), date_end=now + timedelta(hours=3)
    )
    later = factories.EventFactory(
        date_begin=now + timedelta(days=3), date_end=now + timedelta(days=4)
    )
    live = page(client, manager, running).content.decode()
    assert '<meta http-equiv="refresh" content="60">' in live and 'id="live"' in live
    calm = page(client, manager, later).content.decode()
    assert "http-equiv" not in calm and 'id="live"' not in calm


def test_booth_and_lead_panels_equal_their_rows(client, manager, summit):
    BoothFactory(event=summit, state=BoothState.UNAVAILABLE)
    panels = {p["name"]: p["data"] for p in page(client, manager, summit).context["panels"]}
    booths = Booth.objects.filter(event=summit)
    shown = {f.label: f.value for f in panels["booths"].figures}
    assert shown["Total"] == booths.count() >= 1
    assert shown["Free"] == booths.filter(state=BoothState.AVAILABLE).count()
    assert shown["Booked / unavailable"] == booths.exclude(state=BoothState.AVAILABLE).count()
    leads = {f.label: f.value for f in panels["leads"].figures}
    assert leads["Leads created"] == LeadProvenance.objects.filter(event=summit).count() >= 1
    desk = {f.label: f.value for f in panels["desk"].figures}
    attended = Registration.objects.filter(event=summit, active=True, state="done").count()
    assert desk["Checked in at the door"] == attended


def test_the_charts_are_svg_with_the_expected_series_and_no_script(client, manager, summit):
    html = page(client, manager, summit).content.decode()
    assert "<script" not in html.split('id="content-main"')[1].split("</main>")[0]
    charts = {}
    for figure in re.finditer(r'<figure data-chart="([^"]+)">(.*?)</figure>', html, re.S):
        (svg,) = SVG.findall(figure.group(2))
        charts[figure.group(1)] = ET.fromstring(svg)  # noqa: S314 — our own page; well-formed XML or this raises
    assert set(charts) >= {"seats-ticket", "days", "check-in"}

    def texts(root) -> list[str]:
        return [
            t.text or "" for t in root.iter() if t.tag.endswith("text") or t.tag.endswith("title")
        ]

    def legends(root) -> list[str]:
        return [
            "".join(t.itertext())
            for g in root.iter()
            if "legend" in (g.get("class") or "").split()
            for t in g.iter()
            if t.tag.endswith("text")
        ]

    for root in charts.values():
        assert not [e for e in root.iter() if e.tag.endswith("script")]
    assert legends(charts["seats-ticket"]) == ["Taken", "Available"]
    assert legends(charts["days"]) == ["Daily", "Cumulative"]
    assert legends(charts["check-in"]) == ["Expected", "Attended"]
    seat_text = texts(charts["seats-ticket"])
    for ticket in summit.tickets.all():
        assert ticket.name in seat_text
    # values are printed on the bars: colour is not the only carrier
    holding = Registration.objects.filter(event=summit, active=True, state__in=HOLDING)
    community = holding.filter(ticket__name="Community").count()
    assert str(community) in seat_text
    total = Registration.objects.filter(event=summit).count()
    assert str(total) in texts(charts["days"])
    # the cumulative series is dashed (a pattern, not only a colour)
    assert "stroke-dasharray" in ET.tostring(charts["days"], encoding="unicode")


def _event_with(n: int) -> Event:
    """An event with two tickets and `n` registrations written in bulk (a quarter attended),
    spread over a week, the seat ledger booked to match through the seat module."""
    event = factories.EventFactory(seats_limited=True, seats_max=10_000)
    tickets = [
        factories.TicketFactory(event=event, seats_max=8_000),
        factories.TicketFactory(event=event),
    ]
    factories.MailFactory(event=event, interval_type="after_sub", interval_unit="now")
    now = timezone.now()
    rows = [
        Registration(
            event=event,
            ticket=tickets[i % 2],
            state=RegistrationState.DONE if i % 4 == 0 else RegistrationState.OPEN,
            barcode=f"{event.pk:04d}{i:08d}",
            name=f"Attendee {i}",
            email=f"a{i}@example.org",
            confirmed_at=now,
            date_closed=now if i % 4 == 0 else None,
        )
        for i in range(n)
    ]
    Registration.objects.bulk_create(rows, batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE events_registration SET created_at = now() - (id %% 7) * interval '1 day' "
            "WHERE event_id = %s",
            [event.pk],
        )
    holds = [
        seats.Hold(
            None,
            t.pk,
            reserved=sum(1 for r in rows if r.ticket == t and r.state == "open"),
            used=sum(1 for r in rows if r.ticket == t and r.state == "done"),
        )
        for t in tickets
    ]
    seats.apply(event=event, holds=holds)
    assert seats.audit(event=event) == []  # the ledger matches the rows
    return event


def test_the_query_count_does_not_grow_with_registrations(client, manager):
    small, large = _event_with(10), _event_with(5_000)
    client.force_login(manager)
    client.get(url(small))  # warm the session / content-type caches
    counts = {}
    for event in (small, large):
        with CaptureQueriesContext(connection) as queries:
            response = client.get(url(event))
        assert response.status_code == 200
        counts[event.pk] = len(queries)
    assert counts[small.pk] == counts[large.pk], counts
    assert response.context["seat"].taken == 5_000
    assert SeatLedger.objects.filter(event=large, slot=None, ticket=None).get().used == 1_250


def test_a_desk_user_sees_the_dashboard_read_only(client, summit):
    desk = user_in("Event desk", "door")
    response = page(client, desk, summit)
    html = response.content.decode()
    assert response.context["can_change"] is False
    assert "<form" not in html.split('id="content-main"')[1]
    assert reverse("admin:events_event_change", args=[summit.pk]) not in html
    assert 'id="figures"' in html
    # viewing registrations is not exporting them all: the door holds no export permission
    assert response.context["can_export"] is False
    assert 'id="export-csv"' not in html


def test_an_event_user_sees_the_edit_link(client, summit):
    response = page(client, user_in("Event user", "organiser"), summit)
    assert response.context["can_change"] is True
    assert reverse("admin:events_event_change", args=[summit.pk]) in response.content.decode()


def test_staff_without_view_permission_on_events_is_refused(client, summit):
    nobody = factories.UserFactory(username="nobody")
    client.force_login(nobody)
    assert client.get(url(summit)).status_code == 403


def test_the_event_list_and_change_page_link_the_dashboard(client, manager, summit):
    client.force_login(manager)
    link = url(summit)
    assert link in client.get(reverse("admin:events_event_changelist")).content.decode()
    change = client.get(reverse("admin:events_event_change", args=[summit.pk]))
    assert link in change.content.decode()


def test_figures_service_on_an_event_without_registrations():
    event = factories.EventFactory()
    assert figures.registrations_per_day(event=event) == []
    assert figures.check_in(event=event).percent == 0


def test_only_view_permission_on_events_is_needed(client, summit):
    viewer = factories.UserFactory(username="viewer")
    viewer.user_permissions.add(Permission.objects.get(codename="view_event"))
    response = page(client, viewer, summit)
    assert response.context["can_export"] is False
    assert "export-csv" not in response.content.decode()


@pytest.mark.parametrize("value", ["²", "١٢", "9" * 30, "1 OR 1=1"])
def test_the_outbox_event_filter_lists_nothing_for_a_value_that_is_no_id(client, manager, value):
    """The mail and SMS outboxes share one event filter: a value that is not an ASCII id lists
    no row (and is no 500)."""
    factories.MailOutboxFactory(registration=factories.RegistrationFactory())
    SmsOutboxFactory()
    client.force_login(manager)
    for name in ("admin:events_mailoutbox_changelist", "admin:sms_smsoutbox_changelist"):
        response = client.get(reverse(name), {"event": value})
        assert response.status_code == 200
        assert response.context["cl"].result_count == 0
