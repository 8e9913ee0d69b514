"""The admin organised by what staff do (events.admin.index), the registration page's links and
"resend confirmation" (events.services.confirmation)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.apps import apps
from django.contrib.auth.models import Group
from django.core.management import call_command
from django.urls import reverse

from events import i18n
from events.admin.index import SECTIONS
from events.errors import Code, DomainError
from events.models import EventAuditLog, MailOutbox, Registration, RegistrationState
from events.services import confirmation, delivery
from tests.events import factories
from tests.helpers import snapshot

pytestmark = pytest.mark.django_db

INTERNAL = {
    "SeatLedger",
    "IntakeIdempotency",
    "MailRegistration",
    "MailSlot",
    "LinkedProduct",
    "RegistrationAnswer",
    "EventAuditLog",
    "SeamOrder",
    "LeadProvenanceRegistration",
    "LeadRequest",
}


def login(client, group: str | None, **kwargs):
    user = factories.UserFactory(**kwargs)
    if group:
        user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return user


def index(client) -> dict[str, list[str]]:
    response = client.get(reverse("admin:index"))
    assert response.status_code == 200
    return {
        app["name"]: [m["object_name"] for m in app["models"]]
        for app in response.context["app_list"]
    }


def test_an_event_user_sees_sections_by_task_and_no_internal_table(client):
    login(client, "Event user")
    sections = index(client)
    listed = {name for models in sections.values() for name in models}
    assert not listed & INTERNAL, listed & INTERNAL
    # the sections come first, in task order (the group has no host-integration permission)
    assert list(sections)[:5] == list(SECTIONS[:5])
    assert "Host integration" not in sections
    assert "Registration" in sections["Attendees"]
    assert {"Event", "Ticket"} <= set(sections["Events"])
    assert {"Mail", "MailOutbox", "SmsOutbox"} <= set(sections["Communication"])
    assert "Booth" in sections["Booths"]
    assert "Lead" in sections["Leads"]
    # the app page too
    events_page = client.get(reverse("admin:app_list", args=["events"]))
    names = {m["object_name"] for app in events_page.context["app_list"] for m in app["models"]}
    assert "Registration" in names and not names & INTERNAL


@pytest.mark.parametrize("who", ["manager", "superuser"])
def test_managers_see_the_internal_tables(client, who):
    if who == "manager":
        login(client, "Event manager")
    else:
        login(client, None, is_superuser=True)
    sections = index(client)
    listed = {name for models in sections.values() for name in models}
    assert {"SeatLedger", "MailRegistration", "EventAuditLog", "SeamOrder"} <= listed
    assert list(sections)[:6] == list(SECTIONS)
    assert {"SeamInbox", "SeamOrder", "LinkedProduct"} <= set(sections["Host integration"])


def test_a_section_lists_core_models_first_then_each_overlays_in_declared_order(client):
    login(client, "Event manager")
    sections = index(client)
    assert sections["Communication"] == [
        "Mail",
        "TypeMail",
        "MessageTemplate",
        "MailOutbox",
        "MailRegistration",
        "MailSlot",
        "SmsOutbox",
    ]
    assert sections["Host integration"][-4:] == [
        "SeamInbox",
        "SeamOrder",
        "WebhookEndpoint",
        "WebhookDelivery",
    ]


APPS = ("events", "booths", "leads", "seams", "sms", "desk")


def test_every_model_has_its_own_verbose_name_and_plural():
    for label in APPS:
        for model in apps.get_app_config(label).get_models():
            meta = model._meta
            assert "verbose_name" in meta.original_attrs, model
            assert "verbose_name_plural" in meta.original_attrs, model
            # never Django's "<name>s" guess on a name that does not take a plain s
            name, plural = str(meta.verbose_name), str(meta.verbose_name_plural)
            assert plural != name and plural.strip(), model
            if name.endswith(("ry", "ty", "cy", "s", "x", "ch", "sh")):
                assert plural != f"{name}s", model


@pytest.fixture
def summit():
    call_command("seed_demo", stdout=StringIO())
    from events.models import Event

    return Event.objects.get(name="Open Source Summit")


def test_registrations_are_searchable_by_name_email_barcode_and_order(client, summit):
    login(client, "Event user")
    reg = Registration.objects.filter(event=summit).exclude(sale_order_ref="").first()
    url = reverse("admin:events_registration_changelist")
    for term in (reg.name, reg.email, reg.barcode, reg.sale_order_ref):
        found = client.get(url, {"q": term}).context["cl"].result_list
        assert reg in found, term


def test_the_registration_page_links_to_its_tickets_page(client, summit):
    login(client, "Event user")
    reg = Registration.objects.filter(event=summit, state="open").first()
    html = client.get(reverse("admin:events_registration_change", args=[reg.pk])).content.decode()
    start = html.index('href="/my-tickets/') + len('href="')
    link = html[start : html.index('"', start)]
    page = client.get(link)
    assert page.status_code == 200
    assert reg.name in page.content.decode()
    assert 'id="resend-confirmation"' in html


def test_resend_confirmation_queues_the_mail_again_and_audits(summit, actor):
    reg = Registration.objects.filter(event=summit, state="open").exclude(email="").first()
    before = MailOutbox.objects.count()
    first = confirmation.resend_confirmation(registration=reg, actor=actor)
    second = confirmation.resend_confirmation(registration=reg, actor=actor)
    assert first != second
    rows = MailOutbox.objects.filter(idempotency_key__in=[first, second])
    assert rows.count() == 2 == MailOutbox.objects.count() - before
    assert {r.recipient for r in rows} == {reg.email}
    # In the registration's language (the summit's name in it).
    assert all(i18n.localized(summit, "name", reg.lang) in r.subject for r in rows)
    audit = EventAuditLog.objects.filter(registration_id=reg.pk, verb=confirmation.VERB)
    assert sorted(a.data["idempotency_key"] for a in audit) == sorted([first, second])


def test_resend_confirmation_refuses_a_draft_and_writes_nothing(summit, actor):
    reg = Registration.objects.filter(event=summit, state=RegistrationState.DRAFT).first()
    before, outbox = snapshot(summit), MailOutbox.objects.count()
    with pytest.raises(DomainError) as refused:
        confirmation.resend_confirmation(registration=reg, actor=actor)
    assert refused.value.code == Code.INVALID_TRANSITION
    assert snapshot(summit) == before and MailOutbox.objects.count() == outbox


def test_resend_confirmation_without_a_confirmation_scheduler_is_refused(actor):
    reg = factories.RegistrationFactory()
    with pytest.raises(DomainError) as refused:
        confirmation.resend_confirmation(registration=reg, actor=actor)
    assert refused.value.code == Code.NOT_FOUND
    assert not MailOutbox.objects.exists()


def test_the_resend_button_posts_through_the_service(client, summit):
    user = login(client, "Event user")
    reg = Registration.objects.filter(event=summit, state="open").exclude(email="").first()
    url = reverse("admin:events_registration_resend_confirmation", args=[reg.pk])
    assert client.get(url).status_code == 405
    response = client.post(url)
    assert response.status_code == 302
    row = EventAuditLog.objects.get(registration_id=reg.pk, verb=confirmation.VERB)
    assert row.actor_id == str(user.pk)
    assert MailOutbox.objects.filter(idempotency_key=row.data["idempotency_key"]).exists()


def test_a_desk_user_cannot_resend(client, summit):
    login(client, "Event desk")
    reg = Registration.objects.filter(event=summit, state="open").first()
    url = reverse("admin:events_registration_resend_confirmation", args=[reg.pk])
    assert client.post(url).status_code == 403
    assert not EventAuditLog.objects.filter(verb=confirmation.VERB).exists()


def test_requeue_puts_a_failed_mail_back_and_audits(actor):
    reg = factories.RegistrationFactory()
    row = factories.MailOutboxFactory(registration=reg, state="failed", attempts=8)
    delivery.requeue(message=row, actor=actor)
    row.refresh_from_db()
    assert (row.state, row.attempts) == ("queued", 0)
    audit = EventAuditLog.objects.get(verb=delivery.REQUEUED)
    assert (audit.event_id, audit.registration_id, audit.data["mail"]) == (
        reg.event_id,
        reg.pk,
        row.pk,
    )


@pytest.mark.parametrize("state", ["queued", "sent"])
def test_requeue_refuses_a_mail_that_did_not_fail_and_writes_nothing(actor, state):
    row = factories.MailOutboxFactory(state=state, attempts=1)
    with pytest.raises(DomainError) as refused:
        delivery.requeue(message=row, actor=actor)
    assert refused.value.code == Code.INVALID_TRANSITION
    row.refresh_from_db()
    assert (row.state, row.attempts) == (state, 1)
    assert not EventAuditLog.objects.exists()


def test_an_event_user_is_not_offered_the_mail_retry(client):
    login(client, "Event user")
    response = client.get(reverse("admin:events_mailoutbox_changelist"))
    form = response.context["action_form"]
    assert "retry" not in [value for value, _ in form.fields["action"].choices] if form else True
