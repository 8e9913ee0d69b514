"""Attendee exports (CSV and XLSX) through tablib: one row per registration with its answers.

Invariants:
- every text cell is made safe for spreadsheets (`safe_cell`): a value starting with one of
  `= + - @ TAB CR` is prefixed with a single quote, so no spreadsheet reads it as a formula
  (OWASP "CSV injection"); commas, quotes and newlines are left to the writers' quoting
  (tablib uses Python's csv module and openpyxl), never stripped;
- every character an XLSX cell cannot hold (C0 controls but tab, LF and CR; U+FFFE, U+FFFF)
  is replaced by U+FFFD in every cell and header, in both formats, before the formula check:
  whatever was stored (the intake refuses them now; older rows, staff input) never fails an
  export, and a staff member sees where a character was;
- the CSV streams: registrations are read in chunks of `CHUNK` by primary key, each chunk's
  answers in one query, and each chunk written as it is read, so memory and the query count
  grow with the number of chunks, not with rows held at once. The XLSX workbook is built in
  memory (openpyxl needs the whole sheet): it is meant for events up to tens of thousands of
  attendees (see docs/spec.md "Staff experience");
- the columns are fixed first, then one per question of the exported events (by title, in
  the events' question order), so a row's answers line up with the header;
- an XLSX of more than BACKGROUND_ROWS registrations is not built during a request: it is
  requested (`request_export`: one `AttendeeExport` row, audited per event, the build nudged
  after commit) and built by the worker (`build_exports`, claimed with SKIP LOCKED, progress
  written every CHUNK rows, the finish fenced by the attempt number), then downloaded by its
  requester until it expires (EXPIRES_AFTER; expired rows are deleted by the next request).
A badge sheet (format `pdf`, events.read.badges) of more than `badges.BACKGROUND_BADGES`
registrations goes through the same request, claim, progress, download and expiry; its row's
`options` hold its layout and filters, and its build draws the badges instead of the rows.
A synchronous export writes nothing (it is not audited; the access log records the request).
Every entry point checks `PERMISSION` (`may_export`): the admin's view and actions, the request
of a background export (`forbidden` otherwise, nothing written) and the worker before it builds
one (a requester who lost it gets a failed export, never the file). The door staff's group does
not hold it.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import tablib
from django.db import DatabaseError, transaction
from django.db.models import Q
from django.utils import timezone

from events.errors import Code, Forbidden, NotFound, ValidationFailed
from events.models import (
    AttendeeExport,
    Event,
    ExportFormat,
    ExportState,
    Question,
    Registration,
    RegistrationAnswer,
    RegistrationState,
)
from events.read import badges
from events.services import audit, nudge

logger = logging.getLogger("events.exports")

# Every attendee's contact details in one file: a permission of its own (least privilege), held
# by the Event user and Event manager groups (events.reference_data), not by the desk's.
PERMISSION = "events.export_registrations"

CHUNK = 1000
BACKGROUND_ROWS = 5_000  # an XLSX of more registrations is built by the worker
EXPIRES_AFTER = timedelta(hours=24)
STALE_AFTER = timedelta(minutes=15)  # a build silent this long (its worker died) is taken over
MAX_ATTEMPTS = 3
BUILD_TASK = "events.build_exports"
BUILD_KEY = "events:nudge:export-build"
REQUESTED = "attendee_export.requested"
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
# What XML 1.0, so an XLSX cell, cannot hold (openpyxl raises IllegalCharacterError on the C0
# ones and would write the two noncharacters into a file spreadsheets refuse to open).
UNWRITABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
REPLACEMENT = "\ufffd"
FIXED = (
    "Registration ID",
    "Event",
    "Barcode",
    "Name",
    "Email",
    "Phone",
    "Company",
    "Ticket",
    "Slot",
    "State",
    "Active",
    "Checked in at",
    "Registered at",
    "Confirmed at",
    "Sale order",
)


def may_export(user: Any) -> bool:
    """An active user holding PERMISSION (a superuser holds every permission); anything else
    (an actor label, an anonymous user) may not."""
    return bool(getattr(user, "is_active", False) and user.has_perm(PERMISSION))


def safe_cell(value: Any) -> Any:
    """A cell every writer can hold and no spreadsheet evaluates: characters XML refuses are
    replaced, then text starting like a formula gets a leading quote."""
    if isinstance(value, str):
        value = UNWRITABLE.sub(REPLACEMENT, value)
        if value.startswith(FORMULA_STARTS):
            return "'" + value
    return value


def _when(value: datetime | None) -> str:
    return timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S") if value else ""


def question_titles(event_ids: Sequence[int]) -> list[str]:
    titles: list[str] = []
    for title in Question.objects.filter(event_id__in=event_ids, active=True).values_list(
        "title", flat=True
    ):
        if title not in titles:
            titles.append(title)
    return titles


def headers(event_ids: Sequence[int]) -> list[str]:
    # A title is staff input, a header a cell like any other.
    return [*FIXED, *(safe_cell(title) for title in question_titles(event_ids))]


def _answers(registration_ids: list[int]) -> dict[int, dict[str, str]]:
    result: dict[int, dict[str, str]] = {pk: {} for pk in registration_ids}
    rows = (
        RegistrationAnswer.objects.filter(registration_id__in=registration_ids)
        .select_related("question", "choice")
        .order_by("registration_id", "question__sequence", "pk")
    )
    for answer in rows:
        text = answer.choice.name if answer.choice is not None else (answer.text_value or "")
        result[answer.registration_id][answer.question.title] = text
    return result


def _row(reg: Registration, answers: dict[str, str], titles: list[str]) -> list[Any]:
    checked_in = reg.date_closed if reg.state == RegistrationState.DONE else None
    values = [
        reg.pk,
        reg.event.name,
        reg.barcode,
        reg.name,
        reg.email,
        reg.phone,
        reg.company_name,
        reg.ticket.name if reg.ticket is not None else "",
        str(reg.slot) if reg.slot is not None else "",
        reg.get_state_display(),
        "yes" if reg.active else "no",
        _when(checked_in),
        _when(reg.created_at),
        _when(reg.confirmed_at),
        reg.sale_order_ref,
        *(answers.get(title, "") for title in titles),
    ]
    return [safe_cell(v) for v in values]


def rows(event_ids: Sequence[int]) -> Iterator[list[Any]]:
    """Every registration of the events (archived ones too, marked), in chunks of CHUNK."""
    titles = question_titles(event_ids)
    base = (
        Registration.objects.filter(event_id__in=event_ids)
        .select_related("event", "ticket", "slot")
        .order_by("pk")
    )
    last = 0
    while True:
        chunk = list(base.filter(pk__gt=last)[:CHUNK])
        if not chunk:
            return
        answers = _answers([r.pk for r in chunk])
        for reg in chunk:
            yield _row(reg, answers[reg.pk], titles)
        last = chunk[-1].pk


def dataset(event_ids: Sequence[int]) -> tablib.Dataset:
    data = tablib.Dataset(headers=headers(event_ids), title="Attendees")
    for row in rows(event_ids):
        data.append(row)
    return data


def stream_csv(event_ids: Sequence[int]) -> Iterable[str]:
    """The CSV text in pieces: the header, then one piece per chunk of rows (tablib's CSV)."""
    yield tablib.Dataset(headers=headers(event_ids)).export("csv")
    piece = tablib.Dataset()
    for row in rows(event_ids):
        piece.append(row)
        if piece.height >= CHUNK:
            yield piece.export("csv")
            piece = tablib.Dataset()
    if piece.height:
        yield piece.export("csv")


def xlsx(event_ids: Sequence[int]) -> bytes:
    return dataset(event_ids).export("xlsx")


def filename(events: Sequence[Event], extension: str) -> str:
    stamp = timezone.localtime().strftime("%Y%m%d-%H%M")
    name = f"event-{events[0].pk}" if len(events) == 1 else f"{len(events)}-events"
    return f"attendees-{name}-{stamp}.{extension}"


# --- large exports, built by the worker --------------------------------------------------


def count(event_ids: Sequence[int]) -> int:
    """The rows an export of these events holds (every registration, archived ones too)."""
    return Registration.objects.filter(event_id__in=event_ids).count()


def in_background(event_ids: Sequence[int], file_format: str) -> bool:
    """An XLSX workbook is built whole in memory: past BACKGROUND_ROWS the worker builds it.
    The CSV streams whatever its size."""
    return file_format == ExportFormat.XLSX and count(event_ids) > BACKGROUND_ROWS


def request_export(
    *,
    event_ids: Sequence[int],
    file_format: str,
    actor: Any,
    now: datetime | None = None,
    options: badges.Options | None = None,
) -> AttendeeExport:
    """Queue an export for the worker; returns its row. `actor` is the requesting user: only
    they download it. A badge sheet (format `pdf`) is of one event, with its `options`.

    Refusals, nothing written: `forbidden` (the actor may not export), `invalid_value`
    (unknown format, a badge sheet of several events or without options), `not_found` (no
    such event).
    """
    now = now or timezone.now()
    if not may_export(actor):
        raise Forbidden("Exporting attendees needs the export permission.", permission=PERMISSION)
    if file_format not in ExportFormat.values:
        raise ValidationFailed(
            f"Unknown export format {file_format!r}.", code=Code.INVALID_VALUE, field="format"
        )
    ids = sorted(set(event_ids))
    if (file_format == ExportFormat.PDF) != (options is not None) or (
        options is not None and len(ids) != 1
    ):
        raise ValidationFailed(
            "A badge sheet is of one event, with its options.",
            code=Code.INVALID_VALUE,
            field="format",
        )
    with transaction.atomic():
        events = list(Event.objects.filter(pk__in=ids).order_by("pk"))
        if not ids or len(events) != len(ids):
            raise NotFound("No such event.", what="event")
        # Expired files (attendee data) go as soon as anyone asks for a new one.
        AttendeeExport.objects.filter(created_at__lt=now - EXPIRES_AFTER).delete()
        export = AttendeeExport.objects.create(
            requested_by=actor,
            event_ids=ids,
            file_format=file_format,
            filename=(
                badges.filename(events[0], options) if options else filename(events, file_format)
            ),
            options=options.as_json() if options else {},
            rows_total=badges.count(ids[0], options) if options else count(ids),
            created_at=now,
        )
        audit.record_many(
            [
                audit.entry(
                    actor=actor,
                    verb=REQUESTED,
                    event=event,
                    data={
                        "export": export.pk,
                        "format": file_format,
                        "events": ids,
                        "rows": export.rows_total,
                    },
                )
                for event in events
            ]
        )
        nudge.after_commit(key=BUILD_KEY, task=BUILD_TASK)
    return export


@dataclass
class BuildReport:
    built: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def build_exports(*, now: datetime | None = None) -> BuildReport:
    """Build every queued export (and take over any whose build went silent), one at a time."""
    report = BuildReport()
    while (export := _claim(now or timezone.now(), report)) is not None:
        _build(export, report)
    return report


def _claim(now: datetime, report: BuildReport) -> AttendeeExport | None:
    while True:
        with transaction.atomic():
            export = (
                AttendeeExport.objects.select_for_update(skip_locked=True)
                .filter(
                    Q(state=ExportState.QUEUED)
                    | Q(state=ExportState.RUNNING, started_at__lt=now - STALE_AFTER)
                )
                .order_by("pk")
                .defer("content")
                .first()
            )
            if export is None:
                return None
            refusal = _refusal(export)
            if refusal:
                export.state = ExportState.FAILED
                export.error = refusal
                export.finished_at = now
                export.save(update_fields=["state", "error", "finished_at"])
                report.failed += 1
                logger.error("attendee export %s: %s", export.pk, export.error)
                continue
            export.state = ExportState.RUNNING
            export.attempts += 1
            export.started_at = now
            export.rows_done = 0
            export.save(update_fields=["state", "attempts", "started_at", "rows_done"])
            return export


def _refusal(export: AttendeeExport) -> str:
    """Why the claimed export is not built, or "": past its attempts, or its requester may no
    longer export (decided when the build starts, not when it was asked for)."""
    if export.attempts >= MAX_ATTEMPTS:
        return f"Gave up after {export.attempts} attempts."
    if not may_export(export.requested_by):
        return "The requester may not export attendees (the export permission is needed)."
    return ""


def _progress(export: AttendeeExport, rows_done: int) -> None:
    """Written outside any transaction, so the requester's page sees it at once; the attempt
    number fences a build that was taken over."""
    AttendeeExport.objects.filter(
        pk=export.pk, state=ExportState.RUNNING, attempts=export.attempts
    ).update(rows_done=rows_done)


def _build(export: AttendeeExport, report: BuildReport) -> None:
    ids = [int(pk) for pk in export.event_ids]
    fenced = AttendeeExport.objects.filter(
        pk=export.pk, state=ExportState.RUNNING, attempts=export.attempts
    )
    try:
        if export.file_format == ExportFormat.PDF:
            written, content = _badge_sheet(export, ids[0])
        else:
            data = tablib.Dataset(headers=headers(ids), title="Attendees")
            for n, row in enumerate(rows(ids), start=1):
                data.append(row)
                if n % CHUNK == 0:
                    _progress(export, n)
            content = data.export(export.file_format)
            written = data.height
    except DatabaseError:
        raise  # the database may answer again: the row stays running and is taken over later
    except Exception as exc:
        # Anything else will fail the same way again: recorded once, loudly, for the requester.
        logger.exception("attendee export %s failed", export.pk)
        fenced.update(
            state=ExportState.FAILED,
            error=f"{type(exc).__name__}: {exc}"[:2000],
            finished_at=timezone.now(),
        )
        report.failed += 1
        return
    if isinstance(content, str):
        content = content.encode("utf-8")
    done = fenced.update(
        state=ExportState.DONE,
        content=content,
        rows_done=written,
        rows_total=written,
        finished_at=timezone.now(),
    )
    report.built += done


def _badge_sheet(export: AttendeeExport, event_id: int) -> tuple[int, bytes]:
    """The badge sheet of an export (events.read.badges), drawn through a temporary file."""
    event = Event.objects.get(pk=event_id)
    with tempfile.TemporaryFile() as out:
        written = badges.write(
            event,
            badges.Options.from_json(export.options),
            out,
            progress=lambda n: _progress(export, n),
        )
        out.seek(0)
        return written, out.read()


def downloadable(*, export_id: int, user: Any, now: datetime | None = None) -> AttendeeExport:
    """The requester's own, unexpired export (`not_found` for anyone else: its existence is not
    told)."""
    now = now or timezone.now()
    export = (
        AttendeeExport.objects.filter(
            pk=export_id, requested_by_id=user.pk, created_at__gte=now - EXPIRES_AFTER
        )
        .defer("content")
        .first()
    )
    if export is None:
        raise NotFound("No such export.", what="export")
    return export


def content_of(export: AttendeeExport) -> bytes:
    return bytes(
        AttendeeExport.objects.filter(pk=export.pk).values_list("content", flat=True).get() or b""
    )
