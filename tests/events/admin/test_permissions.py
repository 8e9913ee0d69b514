"""The three staff groups (spec.md §9), through the real admin with the Django test client.

Event desk reads events and registrations and checks in; Event user manages events and their
lines but deletes nothing and only reads types; Event manager may do everything.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.forms import CheckboxInput, MultiWidget

from events.models import Event, EventAuditLog, EventType, Registration, TypeMail
from tests.booths import factories as booth_factories
from tests.events import factories

pytestmark = pytest.mark.django_db

EVENT_CHANGE = "/admin/events/event/{}/change/"
TYPE_DELETE = "/admin/events/eventtype/{}/delete/"


def staff(group_name: str):
    user = factories.UserFactory(username=group_name.lower().replace(" ", "-"))
    user.groups.add(Group.objects.get(name=group_name))
    assert not user.is_superuser and user.is_staff
    return user


def codenames(group_name: str) -> set[str]:
    return {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Group.objects.get(name=group_name).permissions.select_related("content_type")
    }


def change_form_data(response) -> dict:
    """The POST body the change form would send, built from the form the admin rendered."""
    data: dict = {}

    def add(form):
        for name, field in form.fields.items():
            bound = form[name]
            value = bound.value()
            widget = getattr(field.widget, "widget", field.widget)  # unwrap the related wrapper
            if isinstance(widget, MultiWidget):
                for i, (sub, part) in enumerate(
                    zip(widget.widgets, widget.decompress(value), strict=True)
                ):
                    data[f"{bound.html_name}_{i}"] = sub.format_value(part) or ""
            elif isinstance(widget, CheckboxInput):
                if value:
                    data[bound.html_name] = "on"
            elif isinstance(value, list | tuple):
                data[bound.html_name] = [str(v) for v in value]
            else:
                data[bound.html_name] = "" if value is None else str(value)

    add(response.context["adminform"].form)
    for inline in response.context["inline_admin_formsets"]:
        formset = inline.formset
        add(formset.management_form)
        for form in formset.forms:
            add(form)
    return data


# --- the groups exist after migrate ------------------------------------------------------------


def test_desk_group_permissions():
    assert codenames("Event desk") == {
        "events.view_event",
        "events.view_registration",
        "events.view_ticket",
        "events.view_slot",
        "events.checkin_registration",
        "desk.view_offlineconflict",
    }


def test_user_group_permissions():
    perms = codenames("Event user")
    for model in ("event", "ticket", "slot", "question", "mail", "registration"):
        assert {f"events.add_{model}", f"events.change_{model}", f"events.view_{model}"} <= perms
    assert "events.checkin_registration" in perms
    assert "events.export_registrations" in perms
    assert {"events.view_eventtype", "events.view_eventauditlog", "leads.view_leadrule"} <= perms
    assert {p for p in perms if ".delete_" in p} == set()
    assert {p for p in perms if p.endswith("_eventtype") or p.endswith("_stage")} == {
        "events.view_eventtype",
        "events.view_stage",
    }


def test_manager_group_has_everything_but_rewriting_the_audit():
    every = {
        f"{p.content_type.app_label}.{p.codename}"
        for p in Permission.objects.filter(
            content_type__app_label__in=["events", "booths", "leads", "seams", "sms", "desk"]
        ).select_related("content_type")
    }
    assert codenames("Event manager") == every - {
        "events.change_eventauditlog",
        "events.delete_eventauditlog",
    }
    assert {"events.delete_eventtype", "events.delete_stage", "leads.delete_leadrule"} <= every


# --- Event desk ---------------------------------------------------------------------------


def test_desk_reads_events_and_registrations_but_cannot_change_an_event(client):
    event = factories.EventFactory(name="Summit")
    registration = factories.RegistrationFactory(event=event)
    client.force_login(staff("Event desk"))

    assert client.get("/admin/events/event/").status_code == 200
    assert client.get("/admin/events/registration/").status_code == 200
    assert client.get(f"/admin/events/registration/{registration.pk}/change/").status_code == 200

    # The change URL is also the admin's view page: it renders read-only, with no save button.
    page = client.get(EVENT_CHANGE.format(event.pk))
    assert page.status_code == 200
    assert page.context["has_change_permission"] is False
    assert page.context["adminform"].form.fields == {}
    assert b'name="_save"' not in page.content

    refused = client.post(EVENT_CHANGE.format(event.pk), {"name": "Hijacked"})
    assert refused.status_code == 403
    assert client.get("/admin/events/event/add/").status_code == 403
    assert client.get(f"/admin/events/event/{event.pk}/delete/").status_code == 403
    assert client.get("/admin/events/eventtype/").status_code == 403
    assert Event.objects.get(pk=event.pk).name == "Summit"
    assert EventAuditLog.objects.filter(verb__startswith="event.").count() == 0


def test_desk_cannot_run_event_actions(client):
    event = factories.EventFactory(is_published=False)
    client.force_login(staff("Event desk"))
    changelist = client.get("/admin/events/event/")
    assert changelist.status_code == 200
    assert changelist.context["action_form"] is None  # no action offered at all
    response = client.post(
        "/admin/events/event/", {"action": "publish", "_selected_action": [event.pk]}
    )
    assert response.status_code == 200
    assert Event.objects.get(pk=event.pk).is_published is False


# --- attendee exports: every attendee's contact details, never for the door ------------------

# Written out here (spec.md §9, docs/spec.md "Groups"): who may export the attendees.
EXPORTS = {"Event desk": False, "Event user": True, "Event manager": True}


@pytest.mark.parametrize(("group", "allowed"), sorted(EXPORTS.items()))
def test_the_export_matrix_over_every_entry_point(client, monkeypatch, group, allowed):
    """The dashboard's buttons, the export view (CSV, XLSX, the POST that queues a large
    XLSX), the progress and download pages, the changelist actions, and the service itself."""
    from events.errors import DomainError
    from events.models import AttendeeExport
    from events.read import exports

    event = factories.EventFactory(name="Summit")
    factories.RegistrationFactory(event=event, name="Ada", email="ada@example.org")
    user = staff(group)
    client.force_login(user)
    ok = 200 if allowed else 403
    assert ("events.export_registrations" in codenames(group)) is allowed

    dashboard = client.get(f"/admin/events/event/{event.pk}/dashboard/")
    assert dashboard.status_code == 200
    assert ('id="export-csv"' in dashboard.content.decode()) is allowed
    csv = client.get(f"/admin/events/event/{event.pk}/export/csv/")
    assert csv.status_code == ok
    assert (b"ada@example.org" in b"".join(getattr(csv, "streaming_content", [b""]))) is allowed
    assert client.get(f"/admin/events/event/{event.pk}/export/xlsx/").status_code == ok

    changelist = client.get("/admin/events/event/")
    form = changelist.context["action_form"]
    offered = {value for value, _ in form.fields["action"].choices} if form else set()
    assert ("export_attendees_csv" in offered) is allowed
    action = client.post(
        "/admin/events/event/", {"action": "export_attendees_csv", "_selected_action": [event.pk]}
    )
    assert ("Content-Disposition" in action) is allowed

    monkeypatch.setattr(exports, "BACKGROUND_ROWS", 0)  # every XLSX goes to the worker
    queued = client.post(f"/admin/events/event/{event.pk}/export/xlsx/")
    assert queued.status_code == (302 if allowed else 403)
    assert AttendeeExport.objects.count() == (1 if allowed else 0)
    if allowed:
        export = AttendeeExport.objects.get()
        assert exports.build_exports().built == 1
        download = f"/admin/events/event/exports/{export.pk}/download/"
        assert client.get(download).status_code == 200
    else:
        with pytest.raises(DomainError) as refused:
            exports.request_export(event_ids=[event.pk], file_format="xlsx", actor=user)
        assert refused.value.code == "forbidden"
        assert not AttendeeExport.objects.exists()
        assert client.get("/admin/events/event/exports/1/").status_code == 403
        assert client.get("/admin/events/event/exports/1/download/").status_code == 403


# --- Event user ---------------------------------------------------------------------------


def test_user_can_change_an_event(client):
    event = factories.EventFactory(name="Summit")
    factories.TicketFactory(event=event, name="Community")
    user = staff("Event user")
    client.force_login(user)
    page = client.get(EVENT_CHANGE.format(event.pk))
    assert page.status_code == 200
    assert page.context["has_change_permission"] is True

    data = change_form_data(page)
    data["name"] = "Summit 2027"
    response = client.post(EVENT_CHANGE.format(event.pk), data)
    assert response.status_code == 302, response.context and response.context["errors"]
    assert response["Location"] == "/admin/events/event/"
    assert Event.objects.get(pk=event.pk).name == "Summit 2027"
    entry = EventAuditLog.objects.get(event_id=event.pk)
    assert (entry.actor_type, entry.actor_id) == ("user", str(user.pk))


def test_user_cannot_delete_an_event_type_or_an_event(client):
    event_type = factories.EventTypeFactory()
    event = factories.EventFactory()
    client.force_login(staff("Event user"))
    assert client.get(TYPE_DELETE.format(event_type.pk)).status_code == 403
    assert client.post(TYPE_DELETE.format(event_type.pk), {"post": "yes"}).status_code == 403
    assert client.get(f"/admin/events/event/{event.pk}/delete/").status_code == 403
    assert EventType.objects.filter(pk=event_type.pk).exists()
    assert Event.objects.filter(pk=event.pk).exists()


# --- Event manager ------------------------------------------------------------------------


def test_manager_can_delete_an_event_type(client):
    event_type = factories.EventTypeFactory()
    factories.TypeTicketFactory(event_type=event_type)
    factories.TypeMailFactory(event_type=event_type)
    booth_factories.TypeBoothFactory(event_type=event_type)
    client.force_login(staff("Event manager"))
    confirm = client.get(TYPE_DELETE.format(event_type.pk))
    assert confirm.status_code == 200
    assert confirm.context["perms_lacking"] == set()
    response = client.post(TYPE_DELETE.format(event_type.pk), {"post": "yes"})
    assert response.status_code == 302
    assert not EventType.objects.filter(pk=event_type.pk).exists()
    assert TypeMail.objects.count() == 0


def test_nobody_can_delete_a_registration_in_the_admin(client):
    registration = factories.RegistrationFactory()
    client.force_login(staff("Event manager"))
    url = f"/admin/events/registration/{registration.pk}/delete/"
    assert client.get(url).status_code == 403
    assert Registration.objects.filter(pk=registration.pk).exists()


@pytest.mark.django_db(transaction=True)
def test_groups_are_back_after_a_transactional_flush():
    """conftest's _reference_data re-creates what migration 0002 made, after a flush."""
    assert set(Group.objects.values_list("name", flat=True)) == {
        "Event desk",
        "Event user",
        "Event manager",
    }
    assert codenames("Event desk") >= {"events.view_event", "events.checkin_registration"}
