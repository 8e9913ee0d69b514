"""B3 — the scheduler pass over a big event, through the built-in outbox mail queue.

An event with N open registrations (bulk-created) and two schedulers: one after_sub
(include_existing, so the pass's own sweep creates the N attendee rows) and one before_event.
1. Messages queued per second by `run_pass`: one pass when only the after_sub scheduler is due,
   one when the reminder is due (the cron limit is lifted so each pass does all N; batches of
   EVENT_MAIL_BATCH as configured).
2. Peak memory: the passes run in a child process per size (small N and big N), which reports
   its RSS high-water mark (VmHWM) before and after its passes; flat means the peak does not
   grow with N (target: peak at big ≤ 1.2× peak at small). The big child's passes are the
   timed ones of 1.
3. Statements per batch (CaptureQueriesContext over both passes / number of batches).
Correctness, every run: one outbox row per (scheduler, registration), no scheduler in error,
the reminder done with mail_count_done = N.
Nudges are counted, not sent (they would reach the real broker of .env).
4. SMS (the sms overlay's gateway outbox): SMS queued per second by `run_pass` for an sms
   reminder over N attendees with phone numbers (E.164 normalisation included), and SMS
   delivered per second by one deliverer (`sms.services.delivery.deliver_outbox`, batches of
   EVENT_MAIL_BATCH) to the local gateway sink (`manage.py sms_gateway_sink`, its own process,
   keep-alive HTTP/1.1). Correctness: one outbox row per attendee, every delivered reference
   received once by the sink (its log), no duplicate.
"""

from __future__ import annotations

import json
import math
import os
import resource
import secrets
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from unittest import mock

from bench import common

TARGET_RATE = 8_000  # messages queued/s (shared BENCHMARKS.md, raised from 2,000)
TARGET_MEMORY_GROWTH = 1.2
CHUNK = 5_000


def _sizes(quick: bool) -> dict:
    if quick:
        return {"big": 10_000, "small": 2_000, "queries": 2_000, "sms": 10_000, "sms_sent": 2_000}
    return {"big": 100_000, "small": 10_000, "queries": 5_000, "sms": 100_000, "sms_sent": 20_000}


def _event(n: int, label: str):
    """An event with n open registrations and the two schedulers; returns (event, mails)."""
    from django.utils import timezone

    from events.models import MessageTemplate, Registration
    from events.services import audit, scheduler, seats
    from events.services import events as event_services

    MessageTemplate.objects.get_or_create(
        ref="b3-reminder",
        defaults={
            "name": "B3 reminder",
            "channel": "mail",
            "subject": "Reminder: {{ event.name }}",
            "body": (
                "<p>Hello {{ registration.name }},</p><p>{{ event.name }} starts "
                "{{ event_begin }}.</p>"
            ),
        },
    )
    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name=f"B3 {label} {n}",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        actor=audit.SYSTEM,
    )
    now = timezone.now()
    for start in range(0, n, CHUNK):
        Registration.objects.bulk_create(
            [
                Registration(
                    event=event,
                    state="open",
                    barcode=str(secrets.randbits(63)),
                    name=f"Guest {i}",
                    email=f"guest{i}@example.org",
                    confirmed_at=now,
                )
                for i in range(start, min(start + CHUNK, n))
            ]
        )
    seats.apply(event=event, holds=[seats.Hold(None, None, reserved=n)])
    common_args = {"event": event, "template_ref": "b3-reminder", "actor": audit.SYSTEM}
    welcome = scheduler.add_scheduler(
        interval_nbr=0,
        interval_unit="now",
        interval_type="after_sub",
        include_existing=True,
        **common_args,
    )
    reminder = scheduler.add_scheduler(
        interval_nbr=1, interval_unit="days", interval_type="before_event", **common_args
    )
    return event, welcome, reminder


def _passes(welcome, reminder) -> list[tuple]:
    """Run the after_sub pass then the reminder pass; (name, messages, seconds) each."""
    from django.utils import timezone

    from events.services import scheduler

    out = []
    for name, at in (
        ("after_sub", timezone.now() + timedelta(minutes=1)),
        ("before_event", reminder.scheduled_date),
    ):
        start = time.perf_counter()
        report = scheduler.run_pass(now=at)
        seconds = time.perf_counter() - start
        out.append((name, report.messages_queued, seconds, report))
    return out


def _check(event, welcome, reminder, n: int) -> list[str]:
    from django.db.models import Count

    from events.models import Mail, MailOutbox

    problems = []
    per_pair = (
        MailOutbox.objects.filter(scheduler__in=[welcome, reminder])
        .values("scheduler_id", "registration_id")
        .annotate(k=Count("id"))
    )
    counts = {}
    for row in per_pair:
        counts[row["k"]] = counts.get(row["k"], 0) + 1
    if counts != {1: 2 * n}:
        problems.append(f"outbox pairs {counts} != {{1: {2 * n}}}")
    for mail in Mail.objects.filter(pk__in=[welcome.pk, reminder.pk]):
        if mail.error_message:
            problems.append(f"scheduler {mail.pk} in error: {mail.error_message}")
    reminder = Mail.objects.get(pk=reminder.pk)
    if not (reminder.mail_done and reminder.mail_count_done == n):
        problems.append(f"reminder done={reminder.mail_done} count={reminder.mail_count_done}")
    return problems


def _cleanup(event_ids: list[int]) -> None:
    """Remove the bench's rows (the audit log is append-only and stays)."""
    from django.db import connection

    from events.models import (
        Event,
        Mail,
        MailOutbox,
        MailRegistration,
        Registration,
        SeatLedger,
    )

    tables = {m: m._meta.db_table for m in (Event, Mail, MailOutbox, MailRegistration)}
    with connection.cursor() as cursor:
        mails = f"SELECT id FROM {tables[Mail]} WHERE event_id = ANY(%s)"  # noqa: S608
        cursor.execute(
            f"DELETE FROM {tables[MailOutbox]} WHERE scheduler_id IN ({mails})",  # noqa: S608
            [event_ids],
        )
        cursor.execute(
            f"DELETE FROM {tables[MailRegistration]} WHERE scheduler_id IN ({mails})",  # noqa: S608
            [event_ids],
        )
    Mail.objects.filter(event_id__in=event_ids).delete()
    Registration.objects.filter(event_id__in=event_ids)._raw_delete(connection.alias)
    SeatLedger.objects.filter(event_id__in=event_ids).delete()
    Event.objects.filter(pk__in=event_ids).delete()


PASS_SETTINGS = {
    "EVENT_TEMPLATE_RENDERER": "events.adapters.DatabaseTemplateRenderer",
    "EVENT_MAIL_QUEUE": "events.adapters.OutboxMailQueue",
    "EVENT_MAIL_CRON_LIMIT": str(10**9),  # one pass does all N
}


def _peak_rss_kib() -> int:
    """The process's RSS high-water mark. Linux's ru_maxrss carries the parent's figure over
    fork + exec, so read VmHWM (reset by exec) when /proc has it."""
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(welcome_id: int, reminder_id: int) -> dict:
    """In a fresh process: run both passes, report timings and peak RSS."""
    import django

    django.setup()
    from events.models import Mail
    from events.services import nudge

    welcome, reminder = Mail.objects.get(pk=welcome_id), Mail.objects.get(pk=reminder_id)
    rss_before = _peak_rss_kib()
    with mock.patch.object(nudge, "after_commit") as nudges:
        timings = _passes(welcome, reminder)
    rss_after = _peak_rss_kib()
    return {
        "passes": {
            name: {"messages": k, "seconds": s, "errors": report.errors}
            for name, k, s, report in timings
        },
        "rss_kib_before": rss_before,
        "rss_kib_peak": rss_after,
        "nudges": nudges.call_count,
    }


def _run_child(welcome, reminder) -> dict:
    env = {**os.environ, **PASS_SETTINGS, "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from bench.b3_scheduler import _child; "
            "print(json.dumps(_child(int(sys.argv[2]), int(sys.argv[3]))))",
            str(common.ROOT),
            str(welcome.pk),
            str(reminder.pk),
        ],
        cwd=common.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(*, quick: bool = False) -> list[dict]:
    from django.conf import settings
    from django.db import connection
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from events.models import Event
    from events.services import nudge

    common.setup()
    # Leftovers of a crashed run (not those of a run going on right now).
    stale = Event.objects.filter(
        name__startswith="B3 ", created_at__lt=timezone.now() - timedelta(hours=2)
    )
    _cleanup_sms(list(stale.values_list("pk", flat=True)))
    _cleanup(list(stale.values_list("pk", flat=True)))
    sizes = _sizes(quick)
    batch = settings.EVENT_MAIL_BATCH
    data: dict = {"quick": quick, "sizes": sizes, "batch": batch}
    rows: list[dict] = []
    events: list[int] = []
    try:
        # 1 + 2. each size in its own process: timings and peak memory
        children = {}
        problems = []
        for label in ("small", "big"):
            n = sizes[label]
            with common.stopwatch() as fill:
                event, welcome, reminder = _event(n, label)
            events.append(event.pk)
            child = _run_child(welcome, reminder)
            child["fill_seconds"] = round(fill(), 1)
            children[label] = child
            problems += [f"{label}: {p}" for p in _check(event, welcome, reminder, n)]
            problems += [
                f"{label}: {name} pass queued {p['messages']} with {p['errors']} errors"
                for name, p in child["passes"].items()
                if p["messages"] != n or p["errors"]
            ]
        data["children"] = children
        data["problems"] = problems
        big = children["big"]["passes"]
        n = sizes["big"]
        rates = {name: p["messages"] / p["seconds"] for name, p in big.items()}
        overall = sum(p["messages"] for p in big.values()) / sum(p["seconds"] for p in big.values())
        data["throughput"] = {
            "attendees": n,
            "per_s": {name: round(r, 1) for name, r in rates.items()},
            "overall_per_s": round(overall, 1),
        }
        rows.append(
            {
                "bench": "B3",
                "what": f"pass, {n:,} attendees, outbox: messages queued/s (batch {batch})",
                "measured": (
                    f"{overall:,.0f}/s (after_sub {rates['after_sub']:,.0f}/s incl. sweep, "
                    f"reminder {rates['before_event']:,.0f}/s)"
                ),
                "target": f"≥ {TARGET_RATE:,}/s",
                "ok": overall >= TARGET_RATE,
                "checks": common.checks(
                    f"each message queued once ({2 * sizes['small']:,} + {2 * n:,}), "
                    "no error, reminders done",
                    problems,
                ),
                "checks_ok": not problems,
            }
        )
        peak = {label: children[label]["rss_kib_peak"] / 1024 for label in children}
        grew = {
            label: (children[label]["rss_kib_peak"] - children[label]["rss_kib_before"]) / 1024
            for label in children
        }
        growth = peak["big"] / peak["small"]
        data["memory"] = {
            "peak_rss_mib": {sizes[k]: round(v, 1) for k, v in peak.items()},
            "pass_growth_mib": {sizes[k]: round(v, 1) for k, v in grew.items()},
            "ratio": round(growth, 3),
        }
        rows.append(
            {
                "bench": "B3",
                "what": (
                    f"pass process peak RSS, {sizes['small']:,} vs {sizes['big']:,} attendees"
                ),
                "measured": (
                    f"{peak['small']:.0f} MiB vs {peak['big']:.0f} MiB = {growth:.2f}× "
                    f"(passes added {grew['small']:.1f} / {grew['big']:.1f} MiB)"
                ),
                "target": f"flat (≤ {TARGET_MEMORY_GROWTH}×)",
                "ok": growth <= TARGET_MEMORY_GROWTH,
                "checks": "",
            }
        )

        # 3. statements per batch (in this process, nudges counted not sent)
        n = sizes["queries"]
        event, welcome, reminder = _event(n, "queries")
        events.append(event.pk)
        with (
            override_settings(**{**PASS_SETTINGS, "EVENT_MAIL_CRON_LIMIT": 10**9}),
            mock.patch.object(nudge, "after_commit"),
            CaptureQueriesContext(connection) as ctx,
        ):
            _passes(welcome, reminder)
        batches = 2 * math.ceil(n / batch) + 1  # + the reminder's closing batch
        per_batch = len(ctx.captured_queries) / batches
        data["queries"] = {
            "attendees": n,
            "statements": len(ctx.captured_queries),
            "batches": batches,
            "per_batch": round(per_batch, 2),
        }
        rows.append(
            {
                "bench": "B3",
                "what": f"statements per batch of {batch} ({n:,} attendees, both passes)",
                "measured": f"{per_batch:.1f} ({len(ctx.captured_queries)} / {batches})",
                "target": "constant (not per message)",
                "ok": per_batch < 20,
                "checks": "",
            }
        )
        # 4. the sms arm
        rows += _sms_rows(sizes, data, events)
    finally:
        _cleanup_sms(events)
        _cleanup(events)
    data["rows"] = rows
    common.write_result("b3_scheduler", data)
    return rows


# --- 4. the sms arm -------------------------------------------------------------------------


def _sms_event(n: int):
    """An event in Belgium with n open registrations holding Belgian mobile numbers written the
    local way (the pass normalises them to E.164) and an sms reminder; (event, reminder)."""
    from django.utils import timezone

    from events.models import MessageTemplate, Registration
    from events.services import audit, scheduler, seats
    from events.services import events as event_services

    MessageTemplate.objects.get_or_create(
        ref="b3-reminder-sms",
        defaults={
            "name": "B3 SMS reminder",
            "channel": "sms",
            "subject": "",
            "body": "{{ registration.name }}: {{ event.name }} starts {{ event_begin }}.",
        },
    )
    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name=f"B3 sms {n}",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        country="BE",
        actor=audit.SYSTEM,
    )
    now = timezone.now()
    for start in range(0, n, CHUNK):
        Registration.objects.bulk_create(
            [
                Registration(
                    event=event,
                    state="open",
                    barcode=str(secrets.randbits(63)),
                    name=f"Guest {i}",
                    email=f"guest{i}@example.org",
                    phone=f"0470 {i // 10_000:02d} {i % 10_000:04d}",
                    confirmed_at=now,
                )
                for i in range(start, min(start + CHUNK, n))
            ]
        )
    seats.apply(event=event, holds=[seats.Hold(None, None, reserved=n)])
    reminder = scheduler.add_scheduler(
        event=event,
        interval_nbr=1,
        interval_unit="days",
        interval_type="before_event",
        template_ref="b3-reminder-sms",
        notification_type="sms",
        actor=audit.SYSTEM,
    )
    return event, reminder


def _start_sink(port: int, token: str, log: Path) -> subprocess.Popen:
    import socket

    env = {
        **os.environ,
        "EVENT_SMS_GATEWAY_URL": f"http://127.0.0.1:{port}/sms",
        "EVENT_SMS_GATEWAY_TOKEN": token,
    }
    proc = subprocess.Popen(
        [sys.executable, "manage.py", "sms_gateway_sink", "--log", str(log)],
        cwd=common.ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while True:  # until it listens
        if proc.poll() is not None:
            raise RuntimeError("the sms gateway sink exited at start")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc
        except OSError:
            if time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError("the sms gateway sink never listened") from None
            time.sleep(0.1)


def _sms_rows(sizes: dict, data: dict, events: list[int]) -> list[dict]:
    import socket
    import tempfile
    from collections import Counter

    from django.test import override_settings

    from events.services import nudge, scheduler
    from sms.models import SmsOutbox
    from sms.services import delivery

    n, m = sizes["sms"], sizes["sms_sent"]
    with common.stopwatch() as fill:
        event, reminder = _sms_event(n)
    events.append(event.pk)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_urlsafe(24)
    wiring = {
        **PASS_SETTINGS,
        "EVENT_MAIL_CRON_LIMIT": 10**9,
        "EVENT_SMS_QUEUE": "sms.adapters.GatewaySmsQueue",
        "EVENT_SMS_GATEWAY_URL": f"http://127.0.0.1:{port}/sms",
        "EVENT_SMS_GATEWAY_TOKEN": token,
    }
    problems: list[str] = []
    with override_settings(**wiring), mock.patch.object(nudge, "after_commit"):
        start = time.perf_counter()
        report = scheduler.run_pass(now=reminder.scheduled_date)
        pass_seconds = time.perf_counter() - start
        rows = SmsOutbox.objects.filter(scheduler=reminder)
        if report.messages_queued != n or report.errors or rows.count() != n:
            problems.append(
                f"pass queued {report.messages_queued} ({rows.count()} rows), "
                f"{report.errors} errors, for {n}"
            )
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "sink.log"
            sink = _start_sink(port, token, log)
            try:
                with override_settings(EVENT_MAIL_CRON_LIMIT=m):
                    start = time.perf_counter()
                    sent = delivery.deliver_outbox()
                    deliver_seconds = time.perf_counter() - start
            finally:
                sink.terminate()
                sink.wait(timeout=30)
            lines = log.read_text().splitlines()
    received = Counter(line.split()[4] for line in lines if " INFO SMS " in line)
    duplicates = sum(1 for line in lines if " duplicate " in line)
    if sent.sent != m or len(received) != m or set(received.values()) != {1} or duplicates:
        problems.append(
            f"delivered {sent.sent}/{m}, sink got {len(received)} references, "
            f"{duplicates} duplicates, retried {sent.retried}, failed {sent.failed}"
        )
    queued_rate, sent_rate = n / pass_seconds, m / deliver_seconds
    data["sms"] = {
        "attendees": n,
        "fill_seconds": round(fill(), 1),
        "pass_seconds": round(pass_seconds, 2),
        "queued_per_s": round(queued_rate, 1),
        "delivered": m,
        "deliver_seconds": round(deliver_seconds, 2),
        "delivered_per_s": round(sent_rate, 1),
        "problems": problems,
    }
    return [
        {
            "bench": "B3",
            "what": f"sms pass, {n:,} attendees, gateway outbox: SMS queued/s",
            "measured": f"{queued_rate:,.0f}/s ({pass_seconds:.1f} s, E.164 + render)",
            "target": f"≥ {TARGET_RATE:,}/s",
            "ok": queued_rate >= TARGET_RATE,
            "checks": common.checks("one outbox row per attendee, no error", problems),
            "checks_ok": not problems,
        },
        {
            "bench": "B3",
            "what": f"sms delivery, one worker → local gateway sink: {m:,} SMS delivered/s",
            "measured": f"{sent_rate:,.0f}/s ({deliver_seconds:.1f} s, HTTP POST each)",
            "target": "",
            "ok": None,
            "checks": common.checks("every reference received once, none twice", problems),
            "checks_ok": not problems,
        },
    ]


def _cleanup_sms(event_ids: list[int]) -> None:
    from sms.models import SmsOutbox

    SmsOutbox.objects.filter(scheduler__event_id__in=event_ids).delete()
