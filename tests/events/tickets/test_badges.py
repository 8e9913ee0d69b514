"""Name badge sheets: names in every script on labels, a QR per badge decoding to the
registration's barcode; the admin's badge page (filters like the registrations list,
permissions) and large sheets built by the worker through the export machinery."""

from __future__ import annotations

import logging
from io import BytesIO

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from events.models import AttendeeExport, ExportFormat, ExportState, RegistrationState
from events.pdf import badges as drawing
from events.pdf import layouts
from events.read import badges, exports
from tests.events import factories
from tests.events.tickets import pdfs

pytestmark = pytest.mark.django_db


def _badges(names: list[str]) -> list[drawing.Badge]:
    return [
        drawing.Badge(
            name=name, company=f"Company {i}", ticket="Full pass", barcode=str(10**18 + i)
        )
        for i, name in enumerate(names)
    ]


@pytest.mark.parametrize("layout", sorted(layouts.LAYOUTS))
def test_names_in_every_script_print_with_a_qr_that_decodes_on_every_layout(layout):
    chosen = layouts.LAYOUTS[layout]
    names = list(pdfs.NAMES.values())
    out = BytesIO()

    count = drawing.render(_badges(names), out, layout=chosen, event_name="Summit 2030")

    content = out.getvalue()
    assert count == len(names)
    assert pdfs.pages(content) == -(-len(names) // chosen.per_page)
    text = pdfs.text(content)
    for name in names:
        assert name in text
    assert "Summit 2030" in text and "Full pass" in text and "Company 6" in text
    decoded = [code for page in range(pdfs.pages(content)) for code in pdfs.qr_codes(content, page)]
    assert sorted(decoded) == sorted(badge.barcode for badge in _badges(names))


def test_a_long_sheet_is_drawn_in_parts_and_joined_in_order(monkeypatch):
    monkeypatch.setattr(drawing, "PAGES_PER_PART", 2)
    names = [f"Guest {i:02d}" for i in range(5)]
    out = BytesIO()

    drawing.render(_badges(names), out, layout=layouts.LAYOUTS["A6"], event_name="Summit")

    content = out.getvalue()
    assert pdfs.pages(content) == 5
    for page, name in enumerate(names):
        assert name in pdfs.text(content, page)
        assert pdfs.qr_codes(content, page, scale=2) == [str(10**18 + page)]
    assert pdfs.metadata(content)["/Title"] == "Name badges: Summit"


def test_a_name_too_long_for_any_size_is_drawn_whole_and_logged(caplog):
    name = "Wolfeschlegelsteinhausenbergerdorffwelchevoralternwarengewissenhaftschaferswessen"
    out = BytesIO()

    with caplog.at_level(logging.WARNING, logger="events.pdf"):
        drawing.render(_badges([name]), out, layout=layouts.LAYOUTS["L7160"], event_name="S")

    assert name in pdfs.text(out.getvalue()).replace(" ", "")
    assert "1 names were drawn below the smallest size" in caplog.text


# --- the admin's badge page -------------------------------------------------------------------


def _staff(client, group: str = "Event user"):
    user = factories.UserFactory(username=group.lower().replace(" ", "-"))
    user.groups.add(Group.objects.get(name=group))
    client.force_login(user)
    return user


@pytest.fixture
def world():
    event = factories.EventFactory(name="Badge Summit")
    day, vip = (factories.TicketFactory(event=event, name=n) for n in ("Day", "VIP"))
    regs = {
        "ada": factories.RegistrationFactory(event=event, ticket=day, name="Ada"),
        "bob": factories.RegistrationFactory(
            event=event, ticket=vip, name="Bob", state=RegistrationState.DONE
        ),
        "zoe": factories.RegistrationFactory(event=event, ticket=vip, name="Zoë"),
        "draft": factories.RegistrationFactory(
            event=event, ticket=day, name="Drafty", state=RegistrationState.DRAFT
        ),
        "gone": factories.RegistrationFactory(
            event=event, ticket=day, name="Gone", state=RegistrationState.CANCEL
        ),
        "archived": factories.RegistrationFactory(
            event=event, ticket=day, name="Archived", state=RegistrationState.CANCEL, active=False
        ),
    }
    factories.RegistrationFactory(name="Elsewhere")  # another event
    return {"event": event, "day": day, "vip": vip, "regs": regs}


def page(event) -> str:
    return reverse("admin:events_event_badges", args=[event.pk])


def test_the_badge_page_offers_layouts_states_and_tickets(client, world):
    _staff(client)

    html = client.get(page(world["event"])).content.decode()

    for layout in layouts.LAYOUTS.values():
        assert f'value="{layout.key}"' in html
    assert ">Day</option>" in html and ">VIP</option>" in html
    dashboard = client.get(reverse("admin:events_event_dashboard", args=[world["event"].pk]))
    assert page(world["event"]).encode() in dashboard.content


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"states": "open_done"}, ["Ada", "Bob", "Zoë"]),
        ({"states": "open"}, ["Ada", "Zoë"]),
        ({"states": "done"}, ["Bob"]),
        ({"states": "open_done", "ticket": "vip"}, ["Bob", "Zoë"]),
    ],
)
def test_the_sheet_holds_the_filtered_registrations_in_name_order(client, world, query, expected):
    _staff(client)
    params = {"layout": "L7163", **query}
    if "ticket" in params:
        params["ticket"] = world[params["ticket"]].pk

    response = client.get(page(world["event"]), params)

    assert response.status_code == 200
    assert response["Content-Type"] == "application/pdf"
    text = pdfs.text(response.content)
    shown = [
        name
        for name in ("Ada", "Bob", "Zoë", "Drafty", "Gone", "Archived", "Elsewhere")
        if name in text
    ]
    assert shown == expected
    positions = [text.index(name) for name in expected]
    assert positions == sorted(positions)  # name order
    by_name = {reg.name: reg.barcode for reg in world["regs"].values()}
    assert pdfs.qr_codes(response.content) == sorted(by_name[name] for name in expected)


def test_a_bad_filter_is_told_and_prints_nothing(client, world):
    _staff(client)
    other_ticket = factories.TicketFactory(name="Not this event's")

    response = client.get(page(world["event"]), {"layout": "L7160", "ticket": other_ticket.pk})

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert "invalid_value — No such ticket on this event." in response.content.decode()


@pytest.mark.parametrize("group", ["Event desk", None])
def test_staff_without_the_export_permission_get_403(client, world, group):
    if group:
        _staff(client, group)
    else:
        user = factories.UserFactory(username="plain-staff")
        client.force_login(user)

    assert client.get(page(world["event"])).status_code == 403
    assert client.get(page(world["event"]), {"layout": "L7160"}).status_code == 403
    assert client.post(page(world["event"]), {"layout": "L7160"}).status_code == 403
    assert AttendeeExport.objects.count() == 0


def test_a_large_sheet_is_built_by_the_worker_with_progress_then_downloaded(
    client, world, monkeypatch
):
    monkeypatch.setattr(badges, "BACKGROUND_BADGES", 2)
    user = _staff(client)
    query = {"layout": "L7160", "states": "open_done", "ticket": "", "slot": ""}

    prepare = client.get(page(world["event"]), query)
    assert prepare.status_code == 200 and b'id="prepare-badges"' in prepare.content
    assert AttendeeExport.objects.count() == 0  # the GET wrote nothing
    queued = client.post(page(world["event"]), query)

    export = AttendeeExport.objects.get()
    assert queued.status_code == 302
    assert queued["Location"] == reverse("admin:events_attendee_export", args=[export.pk])
    assert (export.file_format, export.state, export.rows_total) == (
        ExportFormat.PDF,
        ExportState.QUEUED,
        3,
    )
    assert export.requested_by == user
    assert export.options == {
        "layout": "L7160",
        "states": "open_done",
        "ticket_id": None,
        "slot_id": None,
    }
    progress = client.get(queued["Location"])
    assert b"Queued" in progress.content and b'http-equiv="refresh"' in progress.content

    assert exports.build_exports().as_dict() == {"built": 1, "failed": 0}

    export.refresh_from_db()
    assert (export.state, export.rows_done) == (ExportState.DONE, 3)
    done = client.get(queued["Location"]).content.decode()
    assert 'id="export-download"' in done and export.filename in done
    download = client.get(reverse("admin:events_attendee_export_download", args=[export.pk]))
    assert download["Content-Type"] == "application/pdf"
    content = download.content
    assert [n for n in ("Ada", "Bob", "Zoë") if n in pdfs.text(content)] == ["Ada", "Bob", "Zoë"]
    assert len(pdfs.qr_codes(content)) == 3


def test_a_badge_sheet_needs_one_event_and_its_options(world, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.org", "x")
    other = factories.EventFactory()
    chosen = badges.Options()

    for kwargs in (
        {"event_ids": [world["event"].pk], "file_format": "pdf"},
        {"event_ids": [world["event"].pk, other.pk], "file_format": "pdf", "options": chosen},
        {"event_ids": [world["event"].pk], "file_format": "xlsx", "options": chosen},
    ):
        with pytest.raises(Exception) as refused:
            exports.request_export(actor=admin, **kwargs)
        assert refused.value.code == "invalid_value"
    assert AttendeeExport.objects.count() == 0


def test_the_layouts_units_are_reportlabs_own():
    """events.pdf.layouts computes its points itself (reportlab is imported by the drawing)."""
    from reportlab.lib import pagesizes, units

    from events.pdf import layouts

    assert (layouts.inch, layouts.mm) == (units.inch, units.mm)
    assert (layouts.A4, layouts.A6) == (pagesizes.A4, pagesizes.A6)
