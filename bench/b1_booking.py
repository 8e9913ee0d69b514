"""B1 — booking through `register()` in-process, beside the raw-SQL floor of the same run.

1. Bookings/s with 1, 4 and 16 threads on one seat-limited event, every thread booking one
   attendee per call until it gets `sold_out`, handing `register()` the event's inputs it read
   once (`registrations.read_inputs`, as a caller that holds them does; `events_book`
   confirms them under the lock on every call: B2 measures the path that reads them per
   request); the raw-SQL floor does the same with psycopg 3
   directly (a conditional `UPDATE … SET taken = taken + 1 WHERE id = … AND taken < max
   RETURNING`, one INSERT, commit) on its own scratch tables. Both run in alternating rounds
   (a fresh event each); the best round of each is kept. Ratio = register / raw.
2. The cost of one booking on an event with 0 registrations and on one with 100,000 (bulk-created,
   the ledger fixed with `seats.apply`), measured in alternating blocks (median per booking).
3. Statements sent by one booking: the `events_book` call (1) with the inputs handed, the
   inputs read then the call (2) without.
4. The same guarantees in their cheapest shape, beside the raw floor (reported, not a target):
   one autocommit statement calling a PL/pgSQL function that locks the Event row, compares a
   digest of what a booking decides on (the event row, stage, tickets, questions and choices,
   after_sub mails) with the one the client decided on, takes the seat through the ledger
   upsert with its limit check, and inserts the registration and its audit row
   (jsonb_populate_recordset), with the client doing nothing but build two JSON documents. It
   shows what the target leaves for Python on this machine: the server's own work for these
   guarantees (a registration row under 7 indexes, the ledger row, the audit row under 5)
   against the floor's one-index table.
Correctness, checked after every run: holders == seats (no oversell, no undersell), every
extra attempt got `sold_out`, `seats.audit()` is empty, and the raw floor did not oversell.
"""

from __future__ import annotations

import secrets
import statistics
import threading
from datetime import timedelta

from bench import common

THREADS = (1, 4, 16)
TARGET_RATIO = 0.5
TARGET_GROWTH = 1.2


def _sizes(quick: bool) -> dict:
    if quick:
        return {"bookings": 600, "big": 10_000, "block": 50, "rounds": 3}
    return {"bookings": 3_000, "big": 100_000, "block": 200, "rounds": 5}


# --- register() ------------------------------------------------------------------------------


def _new_event(name: str, seats_max: int):
    from django.utils import timezone

    from events.services import audit
    from events.services import events as event_services

    begin = timezone.now() + timedelta(days=30)
    return event_services.create_event(
        name=name,
        date_begin=begin,
        date_end=begin + timedelta(hours=8),
        seats_limited=True,
        seats_max=seats_max,
        actor=audit.SYSTEM,
    )


def _book_until_sold_out(event, threads: int) -> dict:
    """Every thread books one attendee per call until `sold_out`; returns counts and time."""
    from django.db import connection

    from events.errors import DomainError
    from events.services import audit, registrations

    barrier = threading.Barrier(threads + 1)
    booked = [0] * threads
    refused: list[str] = []
    errors: list[str] = []

    def worker(index: int) -> None:
        try:
            connection.ensure_connection()
            inputs = registrations.read_inputs(event.pk, None)  # the caller's, once per thread
            barrier.wait()
            n = 0
            while True:
                try:
                    registrations.register(
                        event=event,
                        attendees=[{"name": f"Bench {index}-{n}"}],
                        actor=audit.SYSTEM,
                        inputs=inputs,
                    )
                except DomainError as exc:
                    refused.append(exc.code)
                    return
                booked[index] += 1
                n += 1
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            errors.append(repr(exc))
        finally:
            connection.close()

    elapsed = common.run_released(worker, threads, barrier)
    return {"booked": sum(booked), "refused": refused, "errors": errors, "seconds": elapsed}


def _check_event(event, seats_max: int, result: dict) -> list[str]:
    from events.models import Registration
    from events.services import seats

    problems = []
    holders = Registration.objects.filter(event=event, state__in=("open", "done")).count()
    if holders != seats_max or result["booked"] != seats_max:
        problems.append(f"holders {holders}, booked {result['booked']} for {seats_max} seats")
    if result["errors"]:
        problems.append(f"errors {result['errors'][:3]}")
    if set(result["refused"]) - {"sold_out"}:
        problems.append(f"refusals {sorted(set(result['refused']))}")
    problems += seats.audit(event=event)
    return problems


# --- the raw-SQL floor -----------------------------------------------------------------------

RAW_DDL = """
CREATE TABLE IF NOT EXISTS bench_raw_event (
    id serial PRIMARY KEY, taken integer NOT NULL DEFAULT 0, max integer NOT NULL
);
CREATE TABLE IF NOT EXISTS bench_raw_booking (
    id bigserial PRIMARY KEY,
    event_id integer NOT NULL REFERENCES bench_raw_event (id),
    name text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
"""


def _raw(threads: int, seats_max: int) -> dict:
    import psycopg

    url = common.psycopg_url()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(RAW_DDL)
        (event_id,) = conn.execute(
            "INSERT INTO bench_raw_event (max) VALUES (%s) RETURNING id", [seats_max]
        ).fetchone()

    barrier = threading.Barrier(threads + 1)
    booked = [0] * threads
    errors: list[str] = []

    def worker(index: int) -> None:
        try:
            with psycopg.connect(url) as conn:
                barrier.wait()
                n = 0
                while True:
                    row = conn.execute(
                        "UPDATE bench_raw_event SET taken = taken + 1 "
                        "WHERE id = %s AND taken < max RETURNING taken",
                        [event_id],
                    ).fetchone()
                    if row is None:
                        conn.rollback()
                        return
                    conn.execute(
                        "INSERT INTO bench_raw_booking (event_id, name) VALUES (%s, %s)",
                        [event_id, f"Raw {index}-{n}"],
                    )
                    conn.commit()
                    booked[index] += 1
                    n += 1
        except Exception as exc:  # noqa: BLE001 - counted as a correctness failure
            errors.append(repr(exc))

    elapsed = common.run_released(worker, threads, barrier)

    with psycopg.connect(url, autocommit=True) as conn:
        (rows,) = conn.execute(
            "SELECT count(*) FROM bench_raw_booking WHERE event_id = %s", [event_id]
        ).fetchone()
    problems = [] if rows == seats_max == sum(booked) else [f"raw rows {rows} for {seats_max}"]
    return {"booked": sum(booked), "seconds": elapsed, "problems": problems + errors}


# --- the guarantees' cheapest shape -----------------------------------------------------------

IDEAL_DDL = """
CREATE OR REPLACE FUNCTION bench_ideal_digest(p_event bigint) RETURNS text
LANGUAGE plpgsql STABLE AS $$
DECLARE digest text;
BEGIN
    SELECT md5(concat_ws('|', to_jsonb(e)::text, s.pipe_end::text,
               EXISTS (SELECT 1 FROM events_ticket t WHERE t.event_id = e.id)::text,
               (SELECT jsonb_agg(to_jsonb(q) || jsonb_build_object('choice_ids',
                           ARRAY(SELECT c.id FROM events_questionchoice c
                                  WHERE c.question_id = q.id)) ORDER BY q.sequence, q.id)
                  FROM events_question q WHERE q.event_id = e.id AND q.active)::text,
               (SELECT jsonb_agg(to_jsonb(m) ORDER BY m.id)
                  FROM events_mail m
                 WHERE m.event_id = e.id AND m.interval_type = 'after_sub')::text))
      INTO digest
      FROM events_event e JOIN events_stage s ON s.id = e.stage_id WHERE e.id = p_event;
    RETURN digest;
END $$;
CREATE OR REPLACE FUNCTION bench_ideal_book(
    p_event bigint, p_digest text, p_count int, p_max int, p_rows jsonb, p_audit jsonb
) RETURNS int LANGUAGE plpgsql AS $$
DECLARE taken int;
BEGIN
    PERFORM 1 FROM events_event WHERE id = p_event FOR UPDATE;
    IF bench_ideal_digest(p_event) IS DISTINCT FROM p_digest THEN
        RAISE EXCEPTION 'bench_ideal_stale';
    END IF;
    INSERT INTO events_seatledger AS l (event_id, slot_id, ticket_id, reserved, used, held)
    VALUES (p_event, NULL, NULL, p_count, 0, 0)
    ON CONFLICT ON CONSTRAINT seat_ledger_key DO UPDATE
       SET reserved = l.reserved + EXCLUDED.reserved
    RETURNING l.reserved + l.used + l.held INTO taken;
    IF taken > p_max THEN
        RAISE EXCEPTION 'bench_ideal_sold_out';
    END IF;
    INSERT INTO events_registration
    SELECT * FROM jsonb_populate_recordset(NULL::events_registration, p_rows);
    INSERT INTO events_eventauditlog
           (at, actor_type, actor_id, actor_label, verb, data, event_id, registration_id)
    SELECT at, actor_type, actor_id, actor_label, verb, data, event_id, registration_id
      FROM jsonb_populate_recordset(NULL::events_eventauditlog, p_audit);
    RETURN taken;
END $$;
"""


def _ideal(seats_max: int) -> dict:
    """Book `seats_max` seats one at a time through bench_ideal_book on one connection, then
    one more (which must be refused); registration ids come 100 at a time."""
    import json
    from datetime import UTC, datetime

    import psycopg

    event = _new_event("B1 ideal", seats_max)
    url = common.psycopg_url()
    booked, problems = 0, []
    from events.models import Registration

    defaults = {
        f.attname: f.get_default()
        for f in Registration._meta.concrete_fields
        if f.has_default() or f.null or f.blank
    }
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(IDEAL_DDL)
        (digest,) = conn.execute("SELECT bench_ideal_digest(%s)", [event.pk]).fetchone()
        ids: list[int] = []

        def book(n: int) -> None:
            if not ids:
                ids.extend(
                    row[0]
                    for row in conn.execute(
                        "SELECT nextval('events_registration_id_seq') FROM generate_series(1, 100)"
                    )
                )
            now = datetime.now(UTC).isoformat()
            pk = ids.pop()
            row = {
                **defaults,  # a column added to the model is written as the ORM would
                "id": pk, "event_id": event.pk, "ticket_id": None, "slot_id": None,
                "state": "open", "active": True, "barcode": str(secrets.randbits(64)),
                "partner_ref": "", "name": f"Ideal {n}", "email": "", "phone": "",
                "company_name": "", "contact_source": "attendee", "sale_order_ref": "",
                "sale_order_line_ref": "", "sale_status": "free", "is_paid": False,
                "cancel_source": "", "utm_source": "", "utm_medium": "", "utm_campaign": "",
                "confirmed_at": now, "date_closed": None, "token_version": 0,
                "created_at": now, "updated_at": now,
            }  # fmt: skip
            entry = {
                "at": now, "actor_type": "system", "actor_id": "", "actor_label": "System",
                "verb": "registration.created", "event_id": event.pk, "registration_id": pk,
                "data": {"state": "open", "ticket": None, "slot": None, "order": ""},
            }  # fmt: skip
            conn.execute(
                "SELECT bench_ideal_book(%s, %s, 1, %s, %s::jsonb, %s::jsonb)",
                [event.pk, digest, seats_max, json.dumps([row]), json.dumps([entry])],
            ).fetchone()

        with common.stopwatch() as elapsed:
            for n in range(seats_max):
                book(n)
                booked += 1
        seconds = elapsed()
        try:
            book(seats_max)
            problems.append("the seat after the last was not refused")
        except psycopg.errors.RaiseException as exc:
            if "bench_ideal_sold_out" not in str(exc):
                problems.append(repr(exc))
    rows = Registration.objects.filter(event=event).count()
    if rows != seats_max:
        problems.append(f"ideal rows {rows} for {seats_max}")
    return {"booked": booked, "seconds": seconds, "problems": problems}


# --- cost against the size of the event ------------------------------------------------------


def _fill(event, n: int) -> None:
    from events.models import Registration
    from events.services import seats

    Registration.objects.bulk_create(
        (
            Registration(event=event, state="open", barcode=str(secrets.randbits(64)), name=f"F{i}")
            for i in range(n)
        ),
        batch_size=5_000,
    )
    seats.apply(event=event, holds=[seats.Hold(None, None, reserved=n)])


def _block(event, count: int) -> list[float]:
    from events.services import audit, registrations

    inputs = registrations.read_inputs(event.pk, None)

    def one():
        registrations.register(
            event=event, attendees=[{"name": "Cost"}], actor=audit.SYSTEM, inputs=inputs
        )

    return common.timed(one, count)


def _statements(event, *, handed: bool) -> list[str]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from events.services import audit, registrations

    inputs = registrations.read_inputs(event.pk, None) if handed else None
    with CaptureQueriesContext(connection) as ctx:
        registrations.register(
            event=event, attendees=[{"name": "Counted"}], actor=audit.SYSTEM, inputs=inputs
        )
    # Django logs an atomic block's BEGIN and COMMIT; a booking outside any transaction sends
    # neither (its inputs read and its events_book call are each their own transaction), so
    # only what was sent is counted.
    return [q["sql"] for q in ctx.captured_queries if q["sql"] not in ("BEGIN", "COMMIT")]


# --- the bench ---------------------------------------------------------------------------------


def run(*, quick: bool = False) -> list[dict]:
    from django.db import connection

    from events.services import seats

    sizes = _sizes(quick)
    rows: list[dict] = []
    data: dict = {"quick": quick, "sizes": sizes, "throughput": {}}

    # 1. throughput, register() vs the raw floor, in alternating rounds (best round of each:
    #    the machine is shared, and noise only ever slows a round down)
    for threads in THREADS:
        seats_max = sizes["bookings"] // sizes["rounds"]
        ours_rates, floor_rates, problems, refused = [], [], [], 0
        for _ in range(sizes["rounds"]):
            raw = _raw(threads, seats_max)
            event = _new_event(f"B1 {threads} threads", seats_max)
            result = _book_until_sold_out(event, threads)
            problems += _check_event(event, seats_max, result) + raw["problems"]
            refused += len(result["refused"])
            ours_rates.append(common.rate(result["booked"], result["seconds"]))
            floor_rates.append(common.rate(raw["booked"], raw["seconds"]))
        ours, floor = max(ours_rates), max(floor_rates)
        ratio = ours / floor
        data["throughput"][threads] = {
            "register_per_s": round(ours, 1),
            "raw_per_s": round(floor, 1),
            "ratio": round(ratio, 3),
            "register_rounds_per_s": [round(r, 1) for r in ours_rates],
            "raw_rounds_per_s": [round(r, 1) for r in floor_rates],
            "bookings_per_round": seats_max,
            "refused": refused,
            "problems": problems,
        }
        rows.append(
            {
                "bench": "B1",
                "what": f"register() bookings/s, {threads} client{'s' if threads > 1 else ''}",
                "measured": f"{ours:,.0f}/s vs raw {floor:,.0f}/s = {ratio:.3f}×",
                "target": f"≥ {TARGET_RATIO}× raw" if threads == 1 else "(reported)",
                "ok": ratio >= TARGET_RATIO if threads == 1 else None,
                "checks": common.checks(
                    f"oversell 0 in {sizes['rounds']}×{seats_max} seats, {refused} sold_out, "
                    "audit clean",
                    problems,
                ),
                "checks_ok": not problems,
            }
        )

    # 2. cost of one booking with 0 and with `big` registrations on the event
    empty = _new_event("B1 empty", 10_000_000)
    big = _new_event("B1 big", 10_000_000)
    with common.stopwatch() as fill_time:
        _fill(big, sizes["big"])
    _block(empty, 20)  # warm both paths (ledger rows exist, statements cached)
    _block(big, 20)
    costs: dict[str, list[float]] = {"empty": [], "big": []}
    for _ in range(sizes["rounds"]):
        costs["empty"] += _block(empty, sizes["block"])
        costs["big"] += _block(big, sizes["block"])
    at_0 = common.median_ms(costs["empty"])
    at_big = common.median_ms(costs["big"])
    growth = at_big / at_0
    problems = seats.audit(event=empty) + seats.audit(event=big)
    big_label = f"{sizes['big']:,}"
    data["cost"] = {
        "ms_at_0": round(at_0, 3),
        f"ms_at_{sizes['big']}": round(at_big, 3),
        "growth": round(growth, 3),
        "p90_ms_at_0": round(statistics.quantiles(costs["empty"], n=10)[-1] * 1000, 3),
        "p90_ms_at_big": round(statistics.quantiles(costs["big"], n=10)[-1] * 1000, 3),
        "fill_seconds": round(fill_time(), 1),
        "problems": problems,
    }
    rows.append(
        {
            "bench": "B1",
            "what": f"cost of one booking, 0 vs {big_label} registrations",
            "measured": f"{at_0:.2f} ms vs {at_big:.2f} ms = {growth:.2f}×",
            "target": f"≤ {TARGET_GROWTH}×",
            "ok": growth <= TARGET_GROWTH,
            "checks": common.checks("audit clean", problems),
            "checks_ok": not problems,
        }
    )

    # 3. statements per booking, with the inputs handed by the caller and read by register()
    on_empty, on_big = _statements(empty, handed=True), _statements(big, handed=True)
    reading = _statements(empty, handed=False)
    data["statements"] = {"empty": on_empty, "big": on_big, "reading_its_inputs": reading}
    rows.append(
        {
            "bench": "B1",
            "what": "statements per booking (0 / big event; reading its own inputs)",
            "measured": f"{len(on_empty)} / {len(on_big)}; {len(reading)}",
            "target": "~6–10, flat",
            "ok": len(on_empty) == len(on_big) and len(reading) <= 10,
            "checks": "",
        }
    )
    # 4. the guarantees' cheapest shape against the floor, alternating rounds, 1 client
    seats_max = sizes["bookings"] // sizes["rounds"]
    ideal_rates, floor_rates, problems = [], [], []
    for _ in range(sizes["rounds"]):
        raw = _raw(1, seats_max)
        ideal = _ideal(seats_max)
        problems += raw["problems"] + ideal["problems"]
        floor_rates.append(common.rate(raw["booked"], raw["seconds"]))
        ideal_rates.append(common.rate(ideal["booked"], ideal["seconds"]))
    best, floor = max(ideal_rates), max(floor_rates)
    data["ideal"] = {
        "per_s": round(best, 1),
        "raw_per_s": round(floor, 1),
        "ratio": round(best / floor, 3),
        "rounds_per_s": [round(r, 1) for r in ideal_rates],
        "raw_rounds_per_s": [round(r, 1) for r in floor_rates],
        "problems": problems,
    }
    rows.append(
        {
            "bench": "B1",
            "what": "the same guarantees as one PL/pgSQL statement, 1 client",
            "measured": f"{best:,.0f}/s vs raw {floor:,.0f}/s = {best / floor:.3f}×",
            "target": "(reported)",
            "ok": None,
            "checks": common.checks("oversell 0, sold_out refused", problems),
            "checks_ok": not problems,
        }
    )
    connection.close()
    data["rows"] = rows
    common.write_result("b1_booking", data)
    return rows
