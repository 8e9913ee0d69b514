"""B7 — the lead pass over a big event with the built-in local sink.

An event with N open registrations (bulk-created; orders of three, one text answer each) and 5
lead rules on it: 3 per attendee (create; confirm with `state in [open, done]`; create with
`email_domain in [example.org]`) and 2 per order (create; confirm with `company_name is_set`),
all matching every registration, so the pass makes 3N + 2·N/3 leads; groups that straddle two
batches take the update path (description appended).
1. Registrations processed per second by one `run_pass` (cron limit lifted; batches of
   EVENT_LEAD_BATCH as configured), sink `leads.adapters.LocalLeadSink`.
2. Peak memory: the pass runs in a child process per size (small N and big N) that reports its
   RSS high-water mark (VmHWM); flat = the peak does not grow with N (≤ 1.2×).
3. Statements per batch at two sizes (CaptureQueriesContext over the pass / batches): constant.
Correctness, every run: each (rule, registration) pair once, the expected number of leads, no
request parked, the request finished (deleted). Nudges are counted, not sent.
"""

# ruff: noqa: S608 — SQL built from model table names only; ids are parameters
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

TARGET_RATE = 1_000
TARGET_MEMORY_GROWTH = 1.2
CHUNK = 5_000
ORDER_SIZE = 3
PASS_SETTINGS = {
    "EVENT_LEAD_SINK": "leads.adapters.LocalLeadSink",
    "EVENT_LEAD_CRON_LIMIT": str(10**9),  # one pass does all N
}


def _sizes(quick: bool) -> dict:
    big = int(os.environ.get("B7_BIG", 0)) or (10_000 if quick else 100_000)
    small = 2_000 if quick else 20_000
    return {"small": small, "big": big, "queries": [1_000, 3_000]}


def _event(n: int, label: str):
    """An event with n open registrations, answers and the 5 rules; queued for the pass."""
    from django.utils import timezone

    from events.models import Question, Registration, RegistrationAnswer
    from events.services import audit
    from events.services import events as event_services
    from leads import services

    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name=f"B7 {label} {n}",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        actor=audit.SYSTEM,
    )
    question = Question.objects.create(event=event, title="Role", question_type="text_box")
    now = timezone.now()
    for start in range(0, n, CHUNK):
        rows = Registration.objects.bulk_create(
            [
                Registration(
                    event=event,
                    state="open",
                    barcode=str(secrets.randbits(63)),
                    name=f"Guest {i}",
                    email=f"guest{i}@example.org",
                    company_name=f"Company {i // ORDER_SIZE}",
                    sale_order_ref=f"B7-{event.pk}-{i // ORDER_SIZE}",
                    confirmed_at=now,
                )
                for i in range(start, min(start + CHUNK, n))
            ]
        )
        RegistrationAnswer.objects.bulk_create(
            [RegistrationAnswer(registration=r, question=question, text_value="CTO") for r in rows]
        )
    specs = [
        ("attendee", "create", []),
        ("attendee", "confirm", [{"field": "state", "op": "in", "value": ["open", "done"]}]),
        ("attendee", "create", [{"field": "email_domain", "op": "in", "value": ["example.org"]}]),
        ("order", "create", []),
        ("order", "confirm", [{"field": "company_name", "op": "is_set", "value": None}]),
    ]
    for i, (basis, trigger, predicates) in enumerate(specs):
        services.create_rule(
            name=f"B7 rule {i}",
            lead_creation_basis=basis,
            lead_creation_trigger=trigger,
            lead_type="lead",
            event=event,
            predicates=predicates,
            actor=audit.SYSTEM,
        )
    with mock.patch("events.services.nudge.after_commit"):
        services.generate_leads(event=event, actor=audit.SYSTEM)
    return event


def _expected_leads(n: int) -> int:
    return 3 * n + 2 * math.ceil(n / ORDER_SIZE)


def _check(event, n: int) -> list[str]:
    from django.db.models import Count

    from leads.models import Lead, LeadProvenance, LeadProvenanceRegistration, LeadRequest

    problems = []
    pairs = LeadProvenanceRegistration.objects.filter(provenance__event=event)
    duplicated = pairs.values("rule_id", "registration_id").annotate(k=Count("id")).filter(k__gt=1)
    if duplicated.exists():
        problems.append("a (rule, registration) pair twice")
    if pairs.count() != 5 * n:
        problems.append(f"pairs {pairs.count()} != {5 * n}")
    leads = Lead.objects.filter(event=event).count()
    provenance = LeadProvenance.objects.filter(event=event).count()
    if not leads == provenance == _expected_leads(n):
        problems.append(f"leads {leads} / provenance {provenance} != {_expected_leads(n)}")
    if LeadRequest.objects.filter(event=event).exists():
        problems.append("request not finished")
    return problems


def _cleanup(event_ids: list[int]) -> None:
    """Remove the bench's rows (the audit log is append-only and stays)."""
    from django.db import connection

    from events.models import Event, Question, Registration, RegistrationAnswer, SeatLedger
    from leads.models import (
        Lead,
        LeadProvenance,
        LeadProvenanceRegistration,
        LeadRequest,
        LeadRule,
        LeadRulePredicate,
    )

    t = {
        m: m._meta.db_table
        for m in (
            Lead,
            LeadProvenance,
            LeadProvenanceRegistration,
            LeadRequest,
            LeadRule,
            LeadRulePredicate,
            Registration,
            RegistrationAnswer,
            Question,
        )
    }
    rules_m2m = LeadRule.event_types.through._meta.db_table
    request_m2m = LeadRequest.rules.through._meta.db_table
    statements = [
        f"DELETE FROM {t[LeadProvenanceRegistration]} WHERE provenance_id IN "
        f"(SELECT id FROM {t[LeadProvenance]} WHERE event_id = ANY(%s))",
        f"DELETE FROM {t[LeadProvenance]} WHERE event_id = ANY(%s)",
        f"DELETE FROM {t[Lead]} WHERE event_id = ANY(%s)",
        f"DELETE FROM {request_m2m} WHERE leadrequest_id IN "
        f"(SELECT id FROM {t[LeadRequest]} WHERE event_id = ANY(%s))",
        f"DELETE FROM {t[LeadRequest]} WHERE event_id = ANY(%s)",
        f"DELETE FROM {t[LeadRulePredicate]} WHERE rule_id IN "
        f"(SELECT id FROM {t[LeadRule]} WHERE event_id = ANY(%s))",
        f"DELETE FROM {rules_m2m} WHERE leadrule_id IN "
        f"(SELECT id FROM {t[LeadRule]} WHERE event_id = ANY(%s))",
        f"DELETE FROM {t[LeadRule]} WHERE event_id = ANY(%s)",
        f"DELETE FROM {t[RegistrationAnswer]} WHERE registration_id IN "
        f"(SELECT id FROM {t[Registration]} WHERE event_id = ANY(%s))",
        f"DELETE FROM {t[Registration]} WHERE event_id = ANY(%s)",
        f"DELETE FROM {t[Question]} WHERE event_id = ANY(%s)",
    ]
    with connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql, [event_ids])
    SeatLedger.objects.filter(event_id__in=event_ids).delete()
    Event.objects.filter(pk__in=event_ids).delete()


def _peak_rss_kib() -> int:
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child() -> dict:
    """In a fresh process: one lead pass over everything queued; timing and peak RSS."""
    import django

    django.setup()
    from leads import services

    rss_before = _peak_rss_kib()
    with mock.patch("events.services.nudge.after_commit") as nudges:
        start = time.perf_counter()
        report = services.run_pass()
        seconds = time.perf_counter() - start
    return {
        "report": report.as_dict(),
        "seconds": seconds,
        "rss_kib_before": rss_before,
        "rss_kib_peak": _peak_rss_kib(),
        "nudges": nudges.call_count,
    }


def _run_child() -> dict:
    env = {**os.environ, **PASS_SETTINGS, "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from bench.b7_leads import _child; print(json.dumps(_child()))",
            str(common.ROOT),
        ],
        cwd=common.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(*, quick: bool = False) -> list[dict]:
    from django.conf import settings
    from django.db import connection
    from django.test import override_settings
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from events.models import Event
    from leads import services

    common.setup()
    stale = Event.objects.filter(
        name__startswith="B7 ", created_at__lt=timezone.now() - timedelta(hours=2)
    )
    _cleanup(list(stale.values_list("pk", flat=True)))
    # Other benches' registrations queue lead requests too (the core hook); with no rule for
    # their events the pass finishes each at its first batch, so they are left in the queue.
    sizes = _sizes(quick)
    batch = settings.EVENT_LEAD_BATCH
    data: dict = {"quick": quick, "sizes": sizes, "batch": batch}
    rows: list[dict] = []
    events: list[int] = []
    try:
        children = {}
        problems = []
        for label in ("small", "big"):
            n = sizes[label]
            with common.stopwatch() as fill:
                event = _event(n, label)
            events.append(event.pk)
            child = _run_child()
            child["fill_seconds"] = round(fill(), 1)
            children[label] = child
            report = child["report"]
            problems += [f"{label}: {p}" for p in _check(event, n)]
            if report["parked"] or report["registrations_walked"] != n:
                problems.append(f"{label}: report {report}")
        data["children"] = children
        data["problems"] = problems
        n = sizes["big"]
        big = children["big"]
        per_s = n / big["seconds"]
        small_rate = sizes["small"] / children["small"]["seconds"]
        rows.append(
            {
                "bench": "B7",
                "what": (
                    f"lead pass, {n:,} registrations × 5 rules, local sink: registrations/s "
                    f"(batch {batch})"
                ),
                "measured": (
                    f"{per_s:,.0f}/s ({big['report']['leads_created']:,} leads created, "
                    f"{big['report']['leads_updated']:,} updated in {big['seconds']:.0f} s; "
                    f"{sizes['small']:,}: {small_rate:,.0f}/s)"
                ),
                "target": f"≥ {TARGET_RATE:,}/s",
                "ok": per_s >= TARGET_RATE,
                "checks": common.checks(
                    "each (rule, registration) once, leads = 3N + 2·N/3, none parked", problems
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
                "bench": "B7",
                "what": f"lead pass peak RSS, {sizes['small']:,} vs {sizes['big']:,} registrations",
                "measured": (
                    f"{peak['small']:.0f} MiB vs {peak['big']:.0f} MiB = {growth:.2f}× "
                    f"(pass added {grew['small']:.1f} / {grew['big']:.1f} MiB)"
                ),
                "target": f"flat (≤ {TARGET_MEMORY_GROWTH}×)",
                "ok": growth <= TARGET_MEMORY_GROWTH,
                "checks": "",
            }
        )

        per_batch = {}
        for n in sizes["queries"]:
            event = _event(n, "queries")
            events.append(event.pk)
            with (
                override_settings(**{**PASS_SETTINGS, "EVENT_LEAD_CRON_LIMIT": 10**9}),
                mock.patch("events.services.nudge.after_commit"),
                CaptureQueriesContext(connection) as ctx,
            ):
                services.run_pass()
            batches = math.ceil(n / batch) + 1  # + the closing batch that finds nothing
            per_batch[n] = (len(ctx.captured_queries), batches)
        data["queries"] = {
            n: {"statements": s, "batches": b, "per_batch": round(s / b, 2)}
            for n, (s, b) in per_batch.items()
        }
        ratios = [s / b for s, b in per_batch.values()]
        rows.append(
            {
                "bench": "B7",
                "what": (
                    f"statements per batch of {batch}, "
                    + " vs ".join(f"{n:,}" for n in per_batch)
                    + " registrations"
                ),
                "measured": " vs ".join(f"{s / b:.1f} ({s} / {b})" for s, b in per_batch.values()),
                "target": "constant (not per registration)",
                "ok": max(ratios) - min(ratios) < 1 and max(ratios) < 30,
                "checks": "",
            }
        )
    finally:
        _cleanup(events)
    data["rows"] = rows
    common.write_result("b7_leads", data)
    return rows
