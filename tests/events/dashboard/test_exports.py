"""Attendee exports (events.read.exports, events.admin.exports): the CSV opens with the
csv module, the XLSX with openpyxl, each row matches its registration with its answers, text
that a spreadsheet would run as a formula is neutralised, and only staff holding the export
permission (`events.export_registrations`) may export: at the admin, when a background export
is requested, and when the worker starts building it."""

from __future__ import annotations

import csv
import io
from datetime import timedelta

import openpyxl
import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from events.errors import DomainError
from events.models import (
    AttendeeExport,
    EventAuditLog,
    QuestionType,
    Registration,
    RegistrationAnswer,
    RegistrationState,
)
from events.read import exports
from tests.events import factories

pytestmark = pytest.mark.django_db

XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
NASTY = [
    "Smith, John",
    'Say "hi" Jones',
    "Line one\nLine two",
    '=HYPERLINK("http://evil","x")',
    "+1+2",
    "-3+4",
    "@SUM(A1)",
    "\tTabbed",
    "\rReturned",
    "Plain Name",
]


@pytest.fixture
def world():
    event = factories.EventFactory(name='Export, "Test" Event')
    slot_event = factories.EventFactory(is_multi_slots=True)
    ticket = factories.TicketFactory(event=event, name="Standard")
    diet = factories.QuestionFactory(event=event, title="Dietary needs", sequence=1)
    shirt = factories.QuestionFactory(
        event=event, title="T-shirt", question_type=QuestionType.SIMPLE_CHOICE, sequence=2
    )
    sizes = [factories.QuestionChoiceFactory(question=shirt, name=n) for n in ("S", "M")]
    regs = []
    for i, name in enumerate(NASTY):
        state = RegistrationState.DONE if i % 3 == 0 else RegistrationState.OPEN
        reg = factories.RegistrationFactory(
            event=event,
            ticket=ticket,
            name=name,
            email=f"p{i}@example.org",
            phone=f"+32 470 00 00 0{i}",
            state=state,
            date_closed=timezone.now() - timedelta(minutes=i) if state == "done" else None,
            sale_order_ref=f"SO-{i}",
        )
        factories.RegistrationAnswerFactory(
            registration=reg, question=diet, text_value=f'={i}*2, "veg"'
        )
        factories.RegistrationAnswerFactory(
            registration=reg, question=shirt, choice=sizes[i % 2], text_value=None
        )
        regs.append(reg)
    other = factories.RegistrationFactory(event=slot_event, name="Elsewhere")
    return {"event": event, "regs": regs, "other": other}


def expected_row(reg) -> dict[str, str]:
    answers = {
        a.question.title: (a.choice.name if a.choice_id else a.text_value)
        for a in reg.answers.all()
    }
    checked = (
        timezone.localtime(reg.date_closed).strftime("%Y-%m-%d %H:%M:%S")
        if reg.state == "done"
        else ""
    )
    return {
        "Registration ID": str(reg.pk),
        "Barcode": reg.barcode,
        "Name": exports.safe_cell(reg.name),
        "Email": reg.email,
        "Phone": exports.safe_cell(reg.phone),
        "Ticket": reg.ticket.name,
        "State": reg.get_state_display(),
        "Checked in at": checked,
        "Sale order": reg.sale_order_ref,
        "Dietary needs": exports.safe_cell(answers["Dietary needs"]),
        "T-shirt": answers["T-shirt"],
    }


def staff(client, group: str | None = None, perms: tuple[str, ...] = ()):
    user = factories.UserFactory()
    if group:
        user.groups.add(Group.objects.get(name=group))
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(user)
    return user


def exporter():
    """A user who may export (the Event user group holds the permission)."""
    user = factories.UserFactory()
    user.groups.add(Group.objects.get(name="Event user"))
    return user


def export_url(event, fmt):
    return reverse("admin:events_event_export", args=[event.pk, fmt])


def test_safe_cell_neutralises_formulas_only():
    assert [exports.safe_cell(v) for v in ("=1", "+1", "-1", "@a", "\tx", "\rx")] == [
        "'=1",
        "'+1",
        "'-1",
        "'@a",
        "'\tx",
        "'\rx",
    ]
    assert exports.safe_cell("Smith, John") == "Smith, John"
    assert exports.safe_cell(12) == 12


def test_the_csv_opens_with_csv_and_each_row_matches(client, world):
    staff(client, "Event user")
    response = client.get(export_url(world["event"], "csv"))
    assert response.status_code == 200
    assert response.streaming
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment;" in response["Content-Disposition"]
    text = b"".join(response.streaming_content).decode()
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    assert len(rows) == len(NASTY)  # the other event's registration is not there
    for reg, row in zip(world["regs"], rows, strict=True):
        reg.refresh_from_db()
        for column, value in expected_row(reg).items():
            assert row[column] == value, column
        assert row["Event"] == world["event"].name
    names = [row["Name"] for row in rows]
    assert names[:3] == ["Smith, John", 'Say "hi" Jones', "Line one\nLine two"]
    assert names[3:9] == ["'" + n for n in NASTY[3:9]]
    assert not any(n.startswith(exports.FORMULA_STARTS) for r in rows for n in r.values())


def test_the_xlsx_opens_with_openpyxl_and_holds_no_formula(client, world):
    staff(client, "Event user")
    response = client.get(export_url(world["event"], "xlsx"))
    assert response.status_code == 200
    book = openpyxl.load_workbook(io.BytesIO(response.content))
    sheet = book.active
    values = list(sheet.iter_rows(values_only=True))
    header, body = values[0], values[1:]
    assert list(header) == exports.headers([world["event"].pk])
    assert len(body) == len(NASTY)
    for reg, cells in zip(world["regs"], body, strict=True):
        reg.refresh_from_db()
        row = dict(zip(header, cells, strict=True))
        for column, value in expected_row(reg).items():
            # XML (inside the XLSX) stores a bare CR as a line end: it reads back as LF.
            assert str(row[column] if row[column] is not None else "") == value.replace(
                "\r", "\n"
            ), column
    for cells in sheet.iter_rows():
        for cell in cells:
            assert cell.data_type != "f", cell.value  # nothing a spreadsheet would evaluate


def test_the_csv_streams_in_chunks_with_one_header(client, world, monkeypatch):
    monkeypatch.setattr(exports, "CHUNK", 3)
    pieces = list(exports.stream_csv([world["event"].pk]))
    assert len(pieces) == 1 + 4  # the header, then 10 rows in chunks of 3
    rows = list(csv.reader(io.StringIO("".join(pieces), newline="")))
    assert rows[0][0] == "Registration ID"
    assert [int(r[0]) for r in rows[1:]] == [r.pk for r in world["regs"]]


def test_export_refused_without_view_permission_on_registrations(client, world):
    staff(client, perms=("view_event",))
    for fmt in ("csv", "xlsx"):
        assert client.get(export_url(world["event"], fmt)).status_code == 403
    changelist = client.get(reverse("admin:events_event_changelist"))
    form = changelist.context["action_form"]  # None when the user is offered no action at all
    actions = [value for value, _ in form.fields["action"].choices] if form else []
    assert "export_attendees_csv" not in actions
    # the action posted anyway is refused too (Django checks the action's permission)
    response = client.post(
        reverse("admin:events_event_changelist"),
        {"action": "export_attendees_csv", "_selected_action": [world["event"].pk]},
    )
    # no action runs: the list again (200 with no action offered, 302 "no action selected")
    assert response.status_code in (200, 302)
    assert response["Content-Type"].startswith("text/html")
    assert "Content-Disposition" not in response


def test_the_view_permission_on_registrations_is_not_enough_to_export(client, world):
    """Reading registrations one by one (the desk's group does) is not taking every attendee's
    contact details in one file."""
    staff(client, perms=("view_event", "view_registration"))
    for fmt in ("csv", "xlsx"):
        assert client.get(export_url(world["event"], fmt)).status_code == 403


def test_export_allowed_with_the_export_permission(client, world):
    staff(client, perms=("view_event", "export_registrations"))
    response = client.get(export_url(world["event"], "csv"))
    assert response.status_code == 200
    assert len(b"".join(response.streaming_content).splitlines()) > len(NASTY)


def test_the_event_action_exports_the_selected_events(client, world):
    staff(client, "Event user")
    response = client.post(
        reverse("admin:events_event_changelist"),
        {"action": "export_attendees_xlsx", "_selected_action": [world["event"].pk]},
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.openxmlformats")
    sheet = openpyxl.load_workbook(io.BytesIO(response.content)).active
    assert sheet.max_row == 1 + len(NASTY)


def test_an_unknown_format_is_not_found(client, world):
    staff(client, "Event user")
    assert client.get(export_url(world["event"], "pdf")).status_code == 404


# --- a large XLSX: built by the worker, with progress and a download link ------------------


@pytest.fixture
def small_limit(monkeypatch):
    """Every XLSX of more than 4 registrations goes to the worker; progress every 3 rows."""
    monkeypatch.setattr(exports, "BACKGROUND_ROWS", 4)
    monkeypatch.setattr(exports, "CHUNK", 3)


def test_a_large_xlsx_is_built_in_the_background_with_progress_and_a_download_link(
    client, world, small_limit, monkeypatch
):
    user = staff(client, "Event user")
    url = export_url(world["event"], "xlsx")
    # the GET writes nothing: it explains and offers one button
    page = client.get(url)
    assert page.status_code == 200
    assert 'id="prepare-export"' in page.content.decode()
    assert not AttendeeExport.objects.exists()
    # the POST queues the build (audited) and leads to the progress page
    response = client.post(url)
    export = AttendeeExport.objects.get()
    progress_url = reverse("admin:events_attendee_export", args=[export.pk])
    assert response.status_code == 302 and response["Location"] == progress_url
    assert (export.state, export.rows_total, export.requested_by) == ("queued", 10, user)
    assert export.event_ids == [world["event"].pk]
    audit = EventAuditLog.objects.get(verb=exports.REQUESTED)
    assert (audit.event_id, audit.actor_id, audit.data["export"]) == (
        world["event"].pk,
        str(user.pk),
        export.pk,
    )
    waiting = client.get(progress_url).content.decode()
    assert '<meta http-equiv="refresh"' in waiting  # reloads itself, no script
    assert 'id="export-rows">0 of 10<' in waiting
    assert "export-download" not in waiting
    # the worker builds it, writing its progress every CHUNK rows
    seen = []
    original = exports._progress

    def spy(export, rows_done):
        original(export, rows_done)
        seen.append(AttendeeExport.objects.get(pk=export.pk).rows_done)

    monkeypatch.setattr(exports, "_progress", spy)
    assert exports.build_exports().as_dict() == {"built": 1, "failed": 0}
    assert seen == [3, 6, 9]
    export.refresh_from_db()
    assert (export.state, export.rows_done, export.attempts) == ("done", 10, 1)
    ready = client.get(progress_url).content.decode()
    assert '<meta http-equiv="refresh"' not in ready
    download = reverse("admin:events_attendee_export_download", args=[export.pk])
    assert f'href="{download}"' in ready
    file = client.get(download)
    assert file.status_code == 200
    assert f'filename="{export.filename}"' in file["Content-Disposition"]
    sheet = openpyxl.load_workbook(io.BytesIO(file.content)).active
    values = list(sheet.iter_rows(values_only=True))
    header, body = values[0], values[1:]
    assert list(header) == exports.headers([world["event"].pk])
    assert [row[0] for row in body] == [r.pk for r in world["regs"]]
    for reg, cells in zip(world["regs"], body, strict=True):
        row = dict(zip(header, cells, strict=True))
        assert row["Name"] == exports.safe_cell(reg.name).replace("\r", "\n")
        assert row["T-shirt"] == reg.answers.get(question__title="T-shirt").choice.name


def test_the_csv_streams_even_when_large(client, world, small_limit):
    staff(client, "Event user")
    response = client.get(export_url(world["event"], "csv"))
    assert response.streaming
    assert not AttendeeExport.objects.exists()


def test_a_small_xlsx_answers_at_once_and_refuses_a_post(client, world, monkeypatch):
    monkeypatch.setattr(exports, "BACKGROUND_ROWS", 10)  # exactly the event's size
    staff(client, "Event user")
    assert client.get(export_url(world["event"], "xlsx"))["Content-Type"] == XLSX
    assert client.post(export_url(world["event"], "xlsx")).status_code == 405
    assert not AttendeeExport.objects.exists()


def test_only_the_requester_follows_and_downloads_an_export(client, world, small_limit):
    staff(client, "Event user")
    client.post(export_url(world["event"], "xlsx"))
    export = AttendeeExport.objects.get()
    exports.build_exports()
    staff(client, "Event manager")  # another user, even a manager
    assert client.get(reverse("admin:events_attendee_export", args=[export.pk])).status_code == 404
    download = reverse("admin:events_attendee_export_download", args=[export.pk])
    assert client.get(download).status_code == 404


def test_a_background_export_is_refused_without_view_permission_on_registrations(
    client, world, small_limit
):
    user = staff(client, "Event user")
    client.post(export_url(world["event"], "xlsx"))
    export = AttendeeExport.objects.get()
    exports.build_exports()
    before = EventAuditLog.objects.count()
    user.groups.clear()
    user.user_permissions.add(Permission.objects.get(codename="view_event"))
    client.force_login(user)
    assert client.post(export_url(world["event"], "xlsx")).status_code == 403
    assert AttendeeExport.objects.count() == 1 and EventAuditLog.objects.count() == before
    download = reverse("admin:events_attendee_export_download", args=[export.pk])
    assert client.get(download).status_code == 403


def test_the_xlsx_action_over_a_large_selection_queues_a_build(client, world, small_limit):
    staff(client, "Event user")
    response = client.post(
        reverse("admin:events_event_changelist"),
        {"action": "export_attendees_xlsx", "_selected_action": [world["event"].pk]},
    )
    export = AttendeeExport.objects.get()
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:events_attendee_export", args=[export.pk])


def test_a_build_that_fails_is_recorded_once_and_shown(client, world, small_limit, monkeypatch):
    staff(client, "Event user")
    client.post(export_url(world["event"], "xlsx"))
    export = AttendeeExport.objects.get()

    def broken(*args, **kwargs):
        raise ValueError("the workbook cannot be written")

    monkeypatch.setattr(exports.tablib.Dataset, "export", broken)
    assert exports.build_exports().as_dict() == {"built": 0, "failed": 1}
    export.refresh_from_db()
    assert export.state == "failed" and "cannot be written" in export.error
    page = client.get(reverse("admin:events_attendee_export", args=[export.pk])).content.decode()
    assert 'id="export-error"' in page and '<meta http-equiv="refresh"' not in page
    assert exports.build_exports().as_dict() == {"built": 0, "failed": 0}  # not tried again


def test_a_silent_build_is_taken_over_and_the_old_builder_is_fenced(world, small_limit):
    user = exporter()
    export = exports.request_export(event_ids=[world["event"].pk], file_format="xlsx", actor=user)
    # a worker claimed it, then went silent for longer than STALE_AFTER
    AttendeeExport.objects.filter(pk=export.pk).update(
        state="running", attempts=1, started_at=timezone.now() - exports.STALE_AFTER * 2
    )
    stale = AttendeeExport.objects.get(pk=export.pk)
    assert exports.build_exports().built == 1
    export.refresh_from_db()
    assert (export.state, export.attempts) == ("done", 2)
    # the first builder finishing late changes nothing (its attempt number is old)
    exports._progress(stale, 3)
    assert AttendeeExport.objects.get(pk=export.pk).rows_done == 10


def test_an_export_past_its_attempts_fails(world, small_limit):
    export = exports.request_export(
        event_ids=[world["event"].pk], file_format="xlsx", actor=exporter()
    )
    AttendeeExport.objects.filter(pk=export.pk).update(
        state="running",
        attempts=exports.MAX_ATTEMPTS,
        started_at=timezone.now() - exports.STALE_AFTER * 2,
    )
    assert exports.build_exports().as_dict() == {"built": 0, "failed": 1}
    assert AttendeeExport.objects.get(pk=export.pk).state == "failed"


def test_expired_exports_are_deleted_by_the_next_request_and_no_longer_served(
    client, world, small_limit
):
    user = staff(client, "Event user")
    old = exports.request_export(
        event_ids=[world["event"].pk],
        file_format="xlsx",
        actor=user,
        now=timezone.now() - exports.EXPIRES_AFTER - timedelta(minutes=1),
    )
    exports.build_exports()
    assert client.get(reverse("admin:events_attendee_export", args=[old.pk])).status_code == 404
    exports.request_export(event_ids=[world["event"].pk], file_format="xlsx", actor=user)
    assert not AttendeeExport.objects.filter(pk=old.pk).exists()


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [({"file_format": "pdf"}, "invalid_value"), ({"event_ids": [0]}, "not_found")],
)
def test_request_export_refusals_write_nothing(world, kwargs, code):
    args = {"event_ids": [world["event"].pk], "file_format": "xlsx", **kwargs}
    before = EventAuditLog.objects.count()
    with pytest.raises(DomainError) as refused:
        exports.request_export(actor=exporter(), **args)
    assert refused.value.code == code
    assert not AttendeeExport.objects.exists() and EventAuditLog.objects.count() == before


def test_the_build_task_runs_the_service_and_beat_runs_it_every_minute(world, small_limit):
    from config.celery import app
    from events import tasks

    exports.request_export(event_ids=[world["event"].pk], file_format="xlsx", actor=exporter())
    assert tasks.build_exports_task() == {"built": 1, "failed": 0}
    schedule = {e["task"]: e["schedule"] for e in app.conf.beat_schedule.values()}
    assert schedule[exports.BUILD_TASK] == 60.0


# --- the export permission at the service and the worker --------------------------------------


@pytest.mark.parametrize("who", ["no permission", "desk group", "inactive exporter"])
def test_request_export_refuses_whoever_may_not_export_and_writes_nothing(world, who):
    user = exporter() if who == "inactive exporter" else factories.UserFactory()
    if who == "desk group":
        user.groups.add(Group.objects.get(name="Event desk"))
    if who == "inactive exporter":
        user.is_active = False
        user.save(update_fields=["is_active"])
    before = EventAuditLog.objects.count()
    with pytest.raises(DomainError) as refused:
        exports.request_export(event_ids=[world["event"].pk], file_format="xlsx", actor=user)
    assert refused.value.code == "forbidden"
    assert not AttendeeExport.objects.exists() and EventAuditLog.objects.count() == before


def test_the_worker_builds_nothing_for_a_requester_who_lost_the_permission(world, small_limit):
    """Decided when the build starts: the group was taken away after the request."""
    kept, lost = exporter(), exporter()
    ids = [world["event"].pk]
    exports.request_export(event_ids=ids, file_format="xlsx", actor=kept)
    refused = exports.request_export(event_ids=ids, file_format="xlsx", actor=lost)
    lost.groups.clear()

    assert exports.build_exports().as_dict() == {"built": 1, "failed": 1}

    refused.refresh_from_db()
    assert (refused.state, refused.content) == ("failed", None)
    assert "export permission" in refused.error
    assert AttendeeExport.objects.get(requested_by=kept).state == "done"
    assert exports.build_exports().as_dict() == {"built": 0, "failed": 0}  # not tried again


# --- characters an XLSX cell cannot hold -------------------------------------------------------

UNWRITABLE = "".join(chr(c) for c in (*range(0x01, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20)))


def _workbook_rows(content: bytes) -> list[tuple]:
    sheet = openpyxl.load_workbook(io.BytesIO(content), read_only=True).active
    return list(sheet.iter_rows(values_only=True))


def _csv_rows(event_ids) -> list[list[str]]:
    return list(csv.reader(io.StringIO("".join(exports.stream_csv(event_ids)), newline="")))


def test_whatever_was_stored_exports_with_the_characters_replaced(world):
    """Rows stored before the intake refused control characters (or typed by staff): every
    cell and header of both formats holds U+FFFD where a character XLSX refuses was."""
    event = world["event"]
    event.name = "Gala\x02Night"
    event.save(update_fields=["name"])
    ticket = factories.TicketFactory(event=event, name="VIP\x03")
    note = factories.QuestionFactory(event=event, title="Note\x04", sequence=3)
    reg = factories.RegistrationFactory(
        event=event,
        ticket=ticket,
        name="Ann\x01e " + UNWRITABLE,
        email="ann@example.org",
        phone="\x1b+32",
        company_name="ACME\x0bInc\ufffe\uffff",
    )
    factories.RegistrationAnswerFactory(
        registration=reg, question=note, text_value="=line\x05one\nline\ttwo\r"
    )

    header, *rows = _workbook_rows(exports.xlsx([event.pk]))
    (row,) = [r for r in rows if r[0] == reg.pk]
    cells = dict(zip(header, row, strict=True))
    csv_header, *csv_rows = _csv_rows([event.pk])
    (csv_row,) = [r for r in csv_rows if r[0] == str(reg.pk)]
    csv_cells = dict(zip(csv_header, csv_row, strict=True))

    expected = {
        "Event": "Gala\ufffdNight",
        "Ticket": "VIP\ufffd",
        "Name": "Ann\ufffde " + "\ufffd" * len(UNWRITABLE),
        "Phone": "\ufffd+32",
        "Company": "ACME\ufffdInc\ufffd\ufffd",
        # the formula check runs on the cleaned text: still neutralised
        "Note\ufffd": "'=line\ufffdone\nline\ttwo\r",
    }
    assert {k: csv_cells[k] for k in expected} == expected
    # openpyxl reads a cell's CR back as LF (XML line-end handling): compared as it reads it
    assert {k: cells[k] for k in expected} == {
        k: v.replace("\r", "\n") for k, v in expected.items()
    }


STORABLE = st.text(
    st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=60
)


@hypothesis_settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=STORABLE, company=STORABLE, answer=STORABLE)
def test_any_storable_text_in_a_name_a_company_or_an_answer_exports(world, name, company, answer):
    """Property: whatever PostgreSQL stored in these fields, both formats build, open and hold
    the text with only the characters XLSX refuses replaced (and formulas neutralised)."""
    reg = world["regs"][0]
    Registration.objects.filter(pk=reg.pk).update(name=name, company_name=company)
    RegistrationAnswer.objects.filter(registration=reg, question__title="Dietary needs").update(
        text_value=answer
    )
    ids = [world["event"].pk]

    header, *rows = _workbook_rows(exports.xlsx(ids))
    csv_header, *csv_rows = _csv_rows(ids)

    (row,) = [r for r in rows if r[0] == reg.pk]
    (csv_row,) = [r for r in csv_rows if r[0] == str(reg.pk)]
    cells = dict(zip(header, row, strict=True))
    csv_cells = dict(zip(csv_header, csv_row, strict=True))
    for column, value in {"Name": name, "Company": company, "Dietary needs": answer}.items():
        expected = exports.safe_cell(value)
        assert not exports.UNWRITABLE.search(expected)
        assert csv_cells[column] == expected
        # XML normalises line ends when the workbook is read: CRLF and a lone CR become LF
        assert (cells[column] or "") == expected.replace("\r\n", "\n").replace("\r", "\n")
