"""B10 — a badge sheet of a large event, built by the worker's path.

An event with N active registrations (bulk-created; names in Latin with diacritics, Greek,
Cyrillic, Arabic, Chinese, Japanese and Korean, every third with a company, two tickets). The
sheet (Avery L7160, 21 labels per A4 page, every registration) is requested as a background
export (`exports.request_export`, format `pdf`) and built by `exports.build_exports()` — the
Celery task's body: registrations read in chunks, the badges drawn in parts, the parts joined,
the file stored in the export row.
1. Badges per second of the build for N = 5,000 (and 500), in a child process per size.
2. Peak memory: each child reports its RSS high-water mark (VmHWM) before and after the build
   and the peak of Python's allocations during it (tracemalloc, in a second child: it slows the
   build); flat = the 5,000 build's peak is within 1.2× of the 500 one's.
Correctness, every run: the stored file has ceil(N / 21) pages, its first and last pages hold
their names, and the QR codes of those pages decode to their registrations' barcodes.
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
from datetime import timedelta
from pathlib import Path

from bench import common

TARGET_RATE = 200
TARGET_MEMORY_GROWTH = 1.2
LAYOUT = "L7160"
NAMES = [
    "Zoë Ångström-Dvořák",
    "Αλέξανδρος Παπαδόπουλος",
    "Дмитрий Иванов",
    "محمد عبد الله",
    "王小明",
    "山田さくら",
    "김민준",
    "Maximiliane von Hohenzollern-Sigmaringen",
]


def _sizes(quick: bool) -> dict:
    return {"small": 100 if quick else 500, "big": 1_000 if quick else 5_000}


def _event(n: int) -> int:
    from django.utils import timezone

    from events.models import Registration, Ticket
    from events.services import audit
    from events.services import events as event_services

    begin = timezone.now() + timedelta(days=30)
    event = event_services.create_event(
        name=f"B10 badges {n}",
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        actor=audit.SYSTEM,
    )
    tickets = [Ticket.objects.create(event=event, name=n) for n in ("Day pass", "Speaker")]
    now = timezone.now()
    Registration.objects.bulk_create(
        [
            Registration(
                event=event,
                ticket=tickets[i % 7 == 0],
                state="open" if i % 4 else "done",
                barcode=str(secrets.randbits(63)),
                name=f"{NAMES[i % len(NAMES)]} {i}",
                email=f"guest{i}@example.org",
                company_name=f"Company {i}" if i % 3 == 0 else "",
                confirmed_at=now,
            )
            for i in range(n)
        ],
        batch_size=5_000,
    )
    return event.pk


def _cleanup(event_ids: list[int]) -> None:
    """Remove the bench's rows (the audit log is append-only and stays)."""
    from django.db import connection

    from events.models import AttendeeExport, Event, Registration, SeatLedger, Ticket

    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {Registration._meta.db_table} WHERE event_id = ANY(%s)", [event_ids]
        )
    for event_id in event_ids:
        AttendeeExport.objects.filter(event_ids=[event_id]).delete()
    Ticket.objects.filter(event_id__in=event_ids).delete()
    SeatLedger.objects.filter(event_id__in=event_ids).delete()
    Event.objects.filter(pk__in=event_ids).delete()


def _peak_rss_kib() -> int:
    status = Path("/proc/self/status")
    if status.is_file():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _child(event_id: int, traced: bool) -> dict:
    """In a fresh process: request the sheet and build it as the worker does."""
    import time
    import tracemalloc
    from unittest import mock

    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from events.models import AttendeeExport
    from events.pdf import fonts
    from events.read import badges, exports

    fonts.chain()  # the fonts are parsed once per worker process, not per sheet
    user, _ = get_user_model().objects.get_or_create(
        username="b10-bench", defaults={"is_staff": True, "is_superuser": True}
    )
    with mock.patch("events.services.nudge.after_commit"):
        export = exports.request_export(
            event_ids=[event_id],
            file_format="pdf",
            actor=user,
            options=badges.Options(layout=LAYOUT),
        )
    rss_before = _peak_rss_kib()
    if traced:
        tracemalloc.start()
    start = time.perf_counter()
    report = exports.build_exports()
    seconds = time.perf_counter() - start
    traced_peak = tracemalloc.get_traced_memory()[1] if traced else 0
    export = AttendeeExport.objects.get(pk=export.pk)
    return {
        "export": export.pk,
        "report": report.as_dict(),
        "state": export.state,
        "badges": export.rows_done,
        "bytes": len(exports.content_of(export)),
        "seconds": seconds,
        "rss_kib_before": rss_before,
        "rss_kib_peak": _peak_rss_kib(),
        "traced_peak_mib": traced_peak / 2**20,
    }


def _run_child(event_id: int, traced: bool = False) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from bench.b10_badges import _child; "
            "print(json.dumps(_child(int(sys.argv[2]), sys.argv[3] == '1')))",
            str(common.ROOT),
            str(event_id),
            "1" if traced else "0",
        ],
        cwd=common.ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _check(export_id: int, event_id: int, n: int) -> list[str]:
    """The stored sheet: its page count, and its first and last pages' names and QR codes."""
    import unicodedata
    from io import BytesIO

    import pypdfium2
    import zxingcpp
    from pypdf import PdfReader

    from events.models import AttendeeExport
    from events.pdf.layouts import LAYOUTS
    from events.read import badges, exports

    per_page = LAYOUTS[LAYOUT].per_page
    content = exports.content_of(AttendeeExport.objects.get(pk=export_id))
    reader = PdfReader(BytesIO(content))
    problems = []
    if len(reader.pages) != math.ceil(n / per_page):
        problems.append(f"{len(reader.pages)} pages, not {math.ceil(n / per_page)}")
    rows = list(badges.rows(event_id, badges.Options(layout=LAYOUT)))
    document = pypdfium2.PdfDocument(content)
    for page in (0, len(reader.pages) - 1):
        on_page = rows[page * per_page : (page + 1) * per_page]
        text = " ".join(unicodedata.normalize("NFKC", reader.pages[page].extract_text()).split())
        missing = [b.name for b in on_page if b.name not in text]
        if missing:
            problems.append(f"page {page + 1}: {len(missing)} names not found")
        image = document[page].render(scale=3).to_pil()
        codes = sorted(r.text for r in zxingcpp.read_barcodes(image))
        if codes != sorted(b.barcode for b in on_page):
            problems.append(f"page {page + 1}: {len(codes)} QR codes of {len(on_page)} decode")
    document.close()
    return problems


def run(*, quick: bool = False) -> list[dict]:
    common.setup()
    sizes = _sizes(quick)
    data: dict = {"quick": quick, "sizes": sizes, "layout": LAYOUT}
    rows: list[dict] = []
    events: list[int] = []
    problems: list[str] = []
    try:
        children = {}
        for label in ("small", "big"):
            n = sizes[label]
            event_id = _event(n)
            events.append(event_id)
            child = _run_child(event_id)
            child["traced_peak_mib"] = _run_child(event_id, traced=True)["traced_peak_mib"]
            children[label] = child
            if child["state"] != "done" or child["badges"] != n:
                problems.append(f"{label}: {child['state']}, {child['badges']} badges")
            else:
                problems += [f"{label}: {p}" for p in _check(child["export"], event_id, n)]
        data["children"] = children
        data["problems"] = problems
        big, small = children["big"], children["small"]
        rate = sizes["big"] / big["seconds"]
        small_rate = sizes["small"] / small["seconds"]
        rows.append(
            {
                "bench": "B10",
                "what": (
                    f"badge sheet ({LAYOUT}, 21 per A4 page) of {sizes['big']:,} attendees, "
                    "built by the worker's path: badges/s"
                ),
                "measured": (
                    f"{rate:,.0f}/s ({big['seconds']:.1f} s, {big['bytes'] / 2**20:.1f} MiB; "
                    f"{sizes['small']:,}: {small_rate:,.0f}/s)"
                ),
                "target": f"≥ {TARGET_RATE:,}/s",
                "ok": rate >= TARGET_RATE,
                "checks": common.checks(
                    "pages = ceil(N/21); first and last pages' names found and QR codes decode",
                    problems,
                ),
                "checks_ok": not problems,
            }
        )
        peak = {k: children[k]["rss_kib_peak"] / 1024 for k in children}
        grew = {
            k: (children[k]["rss_kib_peak"] - children[k]["rss_kib_before"]) / 1024
            for k in children
        }
        traced = {k: children[k]["traced_peak_mib"] for k in children}
        growth = peak["big"] / peak["small"]
        data["memory"] = {
            "peak_rss_mib": {sizes[k]: round(v, 1) for k, v in peak.items()},
            "build_growth_mib": {sizes[k]: round(v, 1) for k, v in grew.items()},
            "traced_peak_mib": {sizes[k]: round(v, 1) for k, v in traced.items()},
            "ratio": round(growth, 3),
        }
        rows.append(
            {
                "bench": "B10",
                "what": f"badge sheet peak RSS, {sizes['small']:,} vs {sizes['big']:,} attendees",
                "measured": (
                    f"{peak['small']:.0f} MiB vs {peak['big']:.0f} MiB = {growth:.2f}× "
                    f"(build added {grew['small']:.1f} / {grew['big']:.1f} MiB; Python heap "
                    f"peak {traced['small']:.1f} / {traced['big']:.1f} MiB)"
                ),
                "target": f"flat (≤ {TARGET_MEMORY_GROWTH}×)",
                "ok": growth <= TARGET_MEMORY_GROWTH,
                "checks": "",
            }
        )
    finally:
        _cleanup(events)
    data["rows"] = rows
    common.write_result("b10_badges", data)
    return rows
