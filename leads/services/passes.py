"""The lead pass (spec-overlay.md §3.3): leased claims on lead requests, walked in batches.

Invariants:
- a request is claimed with one guarded UPDATE (`FOR UPDATE SKIP LOCKED` on a free or expired
  lease, by the database clock `clock_timestamp()`), which bumps its `fencing_token`: one walker
  per event, and a walker that lost its lease can tell;
- each batch is one transaction: read up to EVENT_LEAD_BATCH registrations after the cursor,
  skip the (rule, registration) pairs that already have provenance, call the sink, write
  provenance, and finally advance the cursor with an UPDATE fenced by the token, the holder and
  an unexpired lease. A walker whose lease expired matches no row: it raises `Fenced` and its
  whole batch (provenance, local leads) rolls back; the new holder redoes it;
- the fencing UPDATE also checks that no one touched the request during the batch (its row
  version, `xmin`): a registration change or a "generate leads" that landed meanwhile keeps the
  cursor where it must be (lower), so nothing is skipped; dedup makes the revisit harmless;
- at most EVENT_LEAD_CRON_LIMIT registrations per pass; when work remains the pass nudges its
  successor after commit — after a short countdown when the only work left is a request a
  booking in flight holds locked (the claim skips it); a finished request is deleted (unless
  touched meanwhile);
- a failure (sink, data) parks the request: its batch rolls back, the cursor stays, the error
  is recorded on the request with an audit row and an ERROR log (when new or changed), and the
  pass goes on with the other requests. Parked requests are retried by the next pass.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import Prefetch, Q
from django.utils import timezone

from events import ports
from events.errors import DomainError
from events.models import Event, Registration, RegistrationState
from events.services import audit, nudge
from leads.adapters import BatchLeadSink
from leads.models import (
    LeadBasis,
    LeadProvenance,
    LeadProvenanceRegistration,
    LeadRequest,
    LeadRule,
    LeadRulePredicate,
    LeadTrigger,
)
from leads.services import values, vocabulary
from leads.services.requests import NUDGE_KEY, PASS_TASK, hold_events

logger = logging.getLogger("leads.pass")

LEASE_SECONDS = 300  # a batch renews it; far longer than one batch takes
S = RegistrationState
ELIGIBLE: dict[str, frozenset[str]] = {
    LeadTrigger.CREATE: frozenset({S.DRAFT, S.OPEN, S.DONE}),
    LeadTrigger.CONFIRM: frozenset({S.OPEN, S.DONE}),
    LeadTrigger.DONE: frozenset({S.DONE}),
}

_REQUEST = LeadRequest._meta.db_table
_REQUEST_RULES = LeadRequest.rules.through._meta.db_table

_CLAIM = f"""
    UPDATE {_REQUEST}
       SET lease_holder = %(holder)s,
           lease_until = clock_timestamp() + make_interval(secs => %(lease)s),
           fencing_token = fencing_token + 1
     WHERE id = (
            SELECT id FROM {_REQUEST}
             WHERE (lease_until IS NULL OR lease_until <= clock_timestamp())
               AND NOT (id = ANY(%(seen)s))
             ORDER BY error_datetime NULLS FIRST, created_at, id
             LIMIT 1
               FOR UPDATE SKIP LOCKED)
 RETURNING id, event_id, fencing_token
"""  # noqa: S608 — table names from model meta; values are parameters

_CLAIMABLE = f"""
    SELECT EXISTS (
        SELECT 1 FROM {_REQUEST}
         WHERE (lease_until IS NULL OR lease_until <= clock_timestamp())
           AND error_datetime IS NULL
           AND NOT (id = ANY(%(seen)s)))
"""  # noqa: S608 — table name from model meta; values are parameters
LOCKED_RETRY_SECONDS = 1.0

_FENCE = "id = %(id)s AND fencing_token = %(token)s AND lease_holder = %(holder)s"
_HELD = _FENCE + " AND lease_until > clock_timestamp()"

_READ = f"""
    SELECT cursor, xmin::text, error_datetime, error_message
      FROM {_REQUEST} WHERE {_HELD}
"""  # noqa: S608

# Advance the cursor unless the request was touched since `version` was read: then keep the
# lower of its (possibly lowered) cursor and this batch's start, so the batch is walked again.
_ADVANCE = f"""
    UPDATE {_REQUEST}
       SET cursor = CASE WHEN xmin = %(version)s::xid THEN %(to)s
                         ELSE LEAST(cursor, %(start)s) END,
           lease_until = clock_timestamp() + make_interval(secs => %(lease)s),
           error_datetime = NULL,
           error_message = ''
     WHERE {_HELD}
 RETURNING cursor
"""  # noqa: S608

_FINISH = f"""
    WITH gone AS (
        DELETE FROM {_REQUEST} WHERE {_HELD} AND xmin = %(version)s::xid RETURNING id
    ), subset AS (
        DELETE FROM {_REQUEST_RULES} WHERE leadrequest_id IN (SELECT id FROM gone)
    )
    SELECT count(*) FROM gone
"""  # noqa: S608

_STILL_HELD = f"SELECT 1 FROM {_REQUEST} WHERE {_HELD}"  # noqa: S608

_RELEASE = f"""
    UPDATE {_REQUEST} SET lease_holder = '', lease_until = NULL WHERE {_FENCE}
"""  # noqa: S608

_PARK = f"""
    UPDATE {_REQUEST}
       SET lease_holder = '', lease_until = NULL,
           error_datetime = %(at)s, error_message = %(message)s
      FROM (SELECT id AS rid, error_message AS old FROM {_REQUEST} WHERE id = %(id)s) AS before
     WHERE {_REQUEST}.id = before.rid AND {_FENCE}
 RETURNING before.old
"""  # noqa: S608


_PROVENANCE_TABLE = LeadProvenance._meta.db_table
_LINK_TABLE = LeadProvenanceRegistration._meta.db_table

# Set-based writes of a batch, one statement each. A conflict means another walker wrote this
# group or pair: only a walker that lost its lease can meet one, and its fencing UPDATE then
# rolls the whole batch back.
_PROVENANCE = f"""
    INSERT INTO {_PROVENANCE_TABLE}
           (event_id, rule_id, group_key, lead_ref, basis, created_at, updated_at)
    SELECT %s, rule_id, group_key, lead_ref, basis, now(), now()
      FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[])
           AS v(rule_id, group_key, lead_ref, basis)
        ON CONFLICT (rule_id, event_id, group_key) DO UPDATE SET updated_at = EXCLUDED.updated_at
 RETURNING id, rule_id, group_key
"""  # noqa: S608 — table names from model meta; values are parameters

_LINK = f"""
    INSERT INTO {_LINK_TABLE} (provenance_id, registration_id, rule_id)
    SELECT * FROM unnest(%s::bigint[], %s::bigint[], %s::bigint[])
        ON CONFLICT (rule_id, registration_id) DO NOTHING
"""  # noqa: S608


class Fenced(Exception):  # noqa: N818 — a control-flow signal, not a domain refusal
    """The walker's lease is gone (expired or taken): its batch must not be written."""


@dataclass
class PassReport:
    requests_claimed: int = 0
    registrations_walked: int = 0
    leads_created: int = 0
    leads_updated: int = 0
    parked: int = 0
    fenced: int = 0  # batches refused because the lease was lost
    requests_finished: int = 0
    work_remaining: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (
            f"requests claimed: {self.requests_claimed}, "
            f"registrations walked: {self.registrations_walked}, "
            f"leads created: {self.leads_created}, leads updated: {self.leads_updated}, "
            f"parked: {self.parked}, fenced: {self.fenced}, "
            f"requests finished: {self.requests_finished}, "
            f"work remaining: {'yes' if self.work_remaining else 'no'}"
        )


@dataclass
class _Claim:
    id: int
    event_id: int
    token: int
    holder: str

    def params(self, **more: Any) -> dict[str, Any]:
        return {"id": self.id, "token": self.token, "holder": self.holder, **more}


@dataclass
class _Batch:
    walked: int = 0
    created: int = 0
    updated: int = 0
    finished: bool = False


@dataclass
class _Pass:
    now: datetime
    batch: int
    budget: int
    holder: str
    sink: ports.EventLeadSink | None = None
    report: PassReport = field(default_factory=PassReport)
    retry_later: bool = False  # a claimable request was locked by a booking in flight

    def lead_sink(self) -> ports.EventLeadSink:
        if self.sink is None:
            self.sink = ports.lead_sink()
        return self.sink


def _holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"[:128]


def run_pass(*, now: datetime | None = None, sink: ports.EventLeadSink | None = None) -> PassReport:
    """Walk the lead requests: at most EVENT_LEAD_CRON_LIMIT registrations, in batches of
    EVENT_LEAD_BATCH. `sink` overrides the wired EVENT_LEAD_SINK (tests, the demo)."""
    ctx = _Pass(
        now=now or timezone.now(),
        batch=settings.EVENT_LEAD_BATCH,
        budget=settings.EVENT_LEAD_CRON_LIMIT,
        holder=_holder(),
        sink=sink,
    )
    seen: list[int] = []
    while True:
        if ctx.budget <= 0:
            ctx.report.work_remaining |= _pending(seen)
            break
        claim = _claim(ctx, seen)
        if claim is None:
            if _locked_away(seen):
                # A free request was skipped because a booking holds its row (the trigger's
                # upsert locks it until that booking commits, writing nothing and nudging
                # nobody when the request already covers it): come back shortly, once it has
                # committed, rather than leave its registrations to beat.
                ctx.report.work_remaining = True
                ctx.retry_later = True
            break
        seen.append(claim.id)
        ctx.report.requests_claimed += 1
        _walk(ctx, claim)
    if ctx.report.work_remaining:
        if ctx.retry_later:
            nudge.after_commit(key=NUDGE_KEY, task=PASS_TASK, countdown=LOCKED_RETRY_SECONDS)
        else:
            nudge.after_commit(key=NUDGE_KEY, task=PASS_TASK)
    return ctx.report


def _locked_away(seen: Sequence[int]) -> bool:
    """Whether a request the claim could have taken (free lease, not parked, not walked by this
    pass) exists: the claim skips rows locked by a transaction in flight (SKIP LOCKED); this
    plain read does not wait for them and sees the committed row."""
    with connection.cursor() as cursor:
        cursor.execute(_CLAIMABLE, {"seen": list(seen)})
        return bool(cursor.fetchone()[0])


def _pending(seen: Sequence[int]) -> bool:
    """Whether a request this pass did not reach is waiting (the budget ran out). Parked
    requests are left to beat's next pass, so a lasting error is not a loop of nudges."""
    return LeadRequest.objects.exclude(pk__in=seen).filter(error_datetime__isnull=True).exists()


def _claim(ctx: _Pass, seen: Sequence[int]) -> _Claim | None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_CLAIM, {"holder": ctx.holder, "lease": LEASE_SECONDS, "seen": list(seen)})
        row = cursor.fetchone()
    if row is None:
        return None
    return _Claim(id=row[0], event_id=row[1], token=row[2], holder=ctx.holder)


def _walk(ctx: _Pass, claim: _Claim) -> None:
    while True:
        limit = min(ctx.batch, ctx.budget)
        if limit <= 0:
            _release(claim)
            ctx.report.work_remaining = True
            return
        try:
            with transaction.atomic():
                step = _batch(ctx, claim, limit)
        except Fenced:
            ctx.report.fenced += 1
            logger.warning("lead request %s: lease lost, batch not written", claim.id)
            return
        # Any failure of the sink or the data parks this request loudly (error on the row,
        # audit row, ERROR log) and the pass goes on; the rolled-back batch is redone later.
        except Exception as exc:  # noqa: BLE001
            _park(ctx, claim, exc)
            return
        ctx.budget -= step.walked
        ctx.report.registrations_walked += step.walked
        ctx.report.leads_created += step.created
        ctx.report.leads_updated += step.updated
        if step.finished:
            ctx.report.requests_finished += 1
            return


def _release(claim: _Claim) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(_RELEASE, claim.params())


def _batch(ctx: _Pass, claim: _Claim, limit: int) -> _Batch:
    with connection.cursor() as cursor:
        cursor.execute(_READ, claim.params())
        row = cursor.fetchone()
    if row is None:
        raise Fenced
    start, version, error_at, error_message = row
    event = Event.objects.get(pk=claim.event_id)
    rules = _applicable_rules(claim.id, event)
    registrations = (
        _registrations(event.pk, start, limit) if rules else []
    )  # no rule applies: nothing to walk, the request is finished
    if not registrations:
        return _finish(claim, version)

    step = _Batch(walked=len(registrations))
    step.created, step.updated = _leads(ctx, event, rules, registrations)
    last = registrations[-1].pk
    if step.created or step.updated:
        audit.record(
            actor=audit.SYSTEM,
            verb="lead.generated",
            event=event.pk,
            data={
                "request": claim.id,
                "registrations": [registrations[0].pk, last],
                "created": step.created,
                "updated": step.updated,
            },
        )
    if error_at is not None:
        audit.record(
            actor=audit.SYSTEM,
            verb="lead_request.recovered",
            event=event.pk,
            data={"request": claim.id, "error": error_message[:500]},
        )
    # The Event row before the request row (the lock order of requests.py): this batch's
    # rows reference the event, and their foreign keys are checked at COMMIT.
    hold_events([claim.event_id])
    with connection.cursor() as cursor:
        cursor.execute(
            _ADVANCE,
            claim.params(version=version, to=last, start=start, lease=LEASE_SECONDS),
        )
        if cursor.fetchone() is None:
            raise Fenced  # rolls back everything this batch wrote
    return step


def _applicable_rules(request_id: int, event: Event) -> list[LeadRule]:
    subset = set(
        LeadRequest.rules.through.objects.filter(leadrequest_id=request_id).values_list(
            "leadrule_id", flat=True
        )
    )
    scope = Q(event_id=event.pk) | Q(event__isnull=True, event_types__isnull=True)
    if event.event_type_id is not None:
        scope |= Q(event__isnull=True, event_types=event.event_type_id)
    rules = LeadRule.objects.filter(scope, active=True)
    if subset:
        rules = rules.filter(pk__in=subset)
    return list(
        rules.distinct()
        .order_by("pk")
        .prefetch_related(Prefetch("predicates", queryset=LeadRulePredicate.objects.all()))
    )


def _registrations(event_id: int, after: int, limit: int) -> list[Registration]:
    return list(Registration.objects.filter(event_id=event_id, pk__gt=after).order_by("pk")[:limit])


def _finish(claim: _Claim, version: str) -> _Batch:
    """Nothing after the cursor: delete the request, unless it was touched since it was read
    (then walk again)."""
    with connection.cursor() as cursor:
        cursor.execute(_FINISH, claim.params(version=version))
        if cursor.fetchone()[0]:
            return _Batch(finished=True)
        cursor.execute(_STILL_HELD, claim.params())
        if cursor.fetchone() is None:
            raise Fenced
    return _Batch()


def _group_key(rule: LeadRule, registration: Registration) -> str:
    if rule.lead_creation_basis == LeadBasis.ORDER:
        if registration.sale_order_ref:
            return f"order:{registration.sale_order_ref}"
        if registration.partner_ref:
            return f"partner:{registration.partner_ref}"
    return f"registration:{registration.pk}"


def _leads(
    ctx: _Pass, event: Event, rules: list[LeadRule], registrations: list[Registration]
) -> tuple[int, int]:
    """Match, call the sink, write provenance: returns (leads created, leads updated)."""
    done = set(
        LeadProvenanceRegistration.objects.filter(
            rule_id__in=[rule.pk for rule in rules],
            registration_id__gte=registrations[0].pk,
            registration_id__lte=registrations[-1].pk,
            provenance__event_id=event.pk,
        ).values_list("rule_id", "registration_id")
    )
    answers = vocabulary.answers_of(r.pk for r in registrations)
    facts = [vocabulary.facts_of(r, answers.get(r.pk, ())) for r in registrations]
    groups: dict[tuple[int, str], list[Registration]] = defaultdict(list)
    by_id = {rule.pk: rule for rule in rules}
    for rule in rules:
        eligible = ELIGIBLE[rule.lead_creation_trigger]
        test = vocabulary.compile_all(rule.predicates.all())
        for fact in facts:
            reg = fact.registration
            if reg.state in eligible and (rule.pk, reg.pk) not in done and test(fact):
                groups[(rule.pk, _group_key(rule, reg))].append(reg)
    if not groups:
        return 0, 0

    existing = {
        (p.rule_id, p.group_key): p
        for p in LeadProvenance.objects.filter(
            event=event,
            rule_id__in={rule_id for rule_id, _ in groups},
            group_key__in={key for _, key in groups},
        )
    }
    earlier = _earlier_members([p for k, p in existing.items() if k in groups])
    if earlier:
        answers.update(vocabulary.answers_of({r.pk for regs in earlier.values() for r in regs}))

    items: list[tuple[str | None, dict[str, Any]]] = []
    keys = list(groups)
    for rule_id, key in keys:
        provenance = existing.get((rule_id, key))
        members = groups[(rule_id, key)]
        if provenance is not None:
            members = sorted(earlier.get(provenance.pk, []) + members, key=lambda r: r.pk)
        lead = values.lead_values(
            rule=by_id[rule_id], event=event, group_key=key, registrations=members, answers=answers
        )
        items.append((provenance.lead_ref if provenance is not None else None, lead))

    refs = _upsert(ctx.lead_sink(), items)

    new = [
        (rule_id, key, ref, by_id[rule_id].lead_creation_basis)
        for (rule_id, key), ref in zip(keys, refs, strict=True)
        if (rule_id, key) not in existing
    ]
    provenance_of = _insert_provenance(event.pk, new)
    touched = []
    for (rule_id, key), ref in zip(keys, refs, strict=True):
        old = existing.get((rule_id, key))
        if old is not None:
            old.lead_ref = ref
            touched.append(old)
            provenance_of[(rule_id, key)] = old.pk
    if touched:
        now = timezone.now()
        for p in touched:
            p.updated_at = now
        LeadProvenance.objects.bulk_update(touched, ["lead_ref", "updated_at"])
    links = [
        (provenance_of[(rule_id, key)], reg.pk, rule_id)
        for (rule_id, key), members in groups.items()
        for reg in members
    ]
    with connection.cursor() as cursor:
        cursor.execute(_LINK, [list(column) for column in zip(*links, strict=True)])
    return len(new), len(touched)


def _insert_provenance(event_id: int, rows: list[tuple[int, str, str, str]]) -> dict:
    """Insert provenance rows (rule, group key, lead ref, basis); {(rule, key): id}."""
    if not rows:
        return {}
    rule_ids, keys, refs, bases = (list(column) for column in zip(*rows, strict=True))
    with connection.cursor() as cursor:
        cursor.execute(_PROVENANCE, [event_id, rule_ids, keys, refs, bases])
        return {(rule_id, key): pk for pk, rule_id, key in cursor.fetchall()}


def _earlier_members(provenances: list[LeadProvenance]) -> dict[int, list[Registration]]:
    """The registrations already on these (order) leads: two queries."""
    if not provenances:
        return {}
    rows = LeadProvenanceRegistration.objects.filter(provenance__in=provenances).values_list(
        "provenance_id", "registration_id"
    )
    members: dict[int, list[int]] = defaultdict(list)
    for provenance_id, registration_id in rows:
        members[provenance_id].append(registration_id)
    ids = {pk for pks in members.values() for pk in pks}
    regs = Registration.objects.in_bulk(list(ids))
    return {p: [regs[r] for r in sorted(set(pks))] for p, pks in members.items()}


def _upsert(sink: ports.EventLeadSink, items: list[tuple[str | None, dict[str, Any]]]) -> list[str]:
    if isinstance(sink, BatchLeadSink):
        refs = sink.upsert_leads(items=items)
    else:
        refs = [sink.upsert_lead(lead_ref=ref, values=lead) for ref, lead in items]
    if len(refs) != len(items) or not all(isinstance(r, str) and r for r in refs):
        raise ImproperlyConfigured("The lead sink must return one non-empty lead_ref per lead.")
    return refs


def _park(ctx: _Pass, claim: _Claim, exc: Exception) -> None:
    """Put the request in error and free its lease; the cursor is untouched. Audit row and
    ERROR log when the error is new or changed; a repeat only logs a WARNING."""
    code = exc.code if isinstance(exc, DomainError) else type(exc).__name__
    message = exc.message if isinstance(exc, DomainError) else str(exc)
    error_message = f"[{code}] {message}"[:2000]
    with transaction.atomic(), connection.cursor() as cursor:
        hold_events([claim.event_id])  # the audit row below references the event
        cursor.execute(_PARK, claim.params(at=ctx.now, message=error_message))
        row = cursor.fetchone()
        if row is None:
            ctx.report.fenced += 1  # lost the lease meanwhile: the new holder owns the row
            return
        ctx.report.parked += 1
        repeated = row[0] == error_message
        if not repeated:
            audit.record(
                actor=audit.SYSTEM,
                verb="lead_request.parked",
                event=claim.event_id,
                data={"request": claim.id, "code": code, "message": message[:500]},
            )
    if repeated:
        logger.warning(
            "lead request %s (event %s) still in error: [%s] %s",
            claim.id,
            claim.event_id,
            code,
            message,
        )
        return
    logger.error(
        "lead request %s (event %s) parked in error: [%s] %s",
        claim.id,
        claim.event_id,
        code,
        message,
        exc_info=not isinstance(exc, DomainError | ImproperlyConfigured),
    )
