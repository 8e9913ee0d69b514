"""Lead requests: the queue of lead work, one row per event (spec-overlay.md §3.3).

Invariants:
- the overlay's triggers on events_registration (migration 0005) run in the transaction
  that creates registrations or changes their state: ONE upsert per event makes the event's
  request cover every rule from below the lowest registration concerned (so the walk revisits
  it); a request that already covers it and that no walker holds is left unwritten. When it
  wrote one, the core hook `registrations_changed` (events.hooks) nudges the pass after
  commit. Dedup (UNIQUE (rule, registration)) makes revisits harmless;
- every write to a request row makes a new row version: a walker compares the version it read
  with the one it fences against, so a change during its batch is never lost (passes.py);
- `generate_leads` (staff) upserts requests with cursor 0, merging rule sets: a request for all
  rules stays for all rules, a request for some rules gains the new one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db import connection, transaction
from django.db.models import Exists, OuterRef

from events.errors import ValidationFailed
from events.models import Event, Registration
from events.services import audit, nudge
from leads.models import LeadProvenance, LeadRequest, LeadRule

NUDGE_KEY = "leads:nudge:lead-pass"
PASS_TASK = "leads.run_pass"  # noqa: S105 — a Celery task name

_REQUEST = LeadRequest._meta.db_table
_REQUEST_RULES = LeadRequest.rules.through._meta.db_table

# New registrations and state changes reach the requests through the overlay's triggers on
# events_registration (migration 0005), in the transaction that wrote them: per event, the
# request is made to cover every rule from below the lowest registration concerned
# (`leads_cover_request`, migrations 0004 and 0006). A request that already covers it and that
# no walker holds is left unwritten: a ticket rush writes no new request row version per
# booking. Leaving it unwritten is safe because the function locks the row FOR KEY SHARE: until
# the booking commits, a walker's claim (FOR UPDATE SKIP LOCKED) skips the request, so no walker
# reads a batch that misses this uncommitted registration and advances past it unfenced
# (tests/leads/test_pass.py: test_an_unwritten_request_still_holds_off_…). KEY SHARE, not the
# upsert's own lock: other changes of the event's registrations (the desks' admissions) share
# it instead of waiting for each other.
# A request a walker holds is always rewritten: its new row version (xmin) is what tells the
# walker that its batch must be walked again (passes.py).
_UPSERT = f"""
    INSERT INTO {_REQUEST}
           (event_id, cursor, lease_holder, fencing_token, error_message, created_at)
    VALUES (%s, 0, '', 0, '', now())
    ON CONFLICT (event_id) DO UPDATE SET cursor = 0
    RETURNING id, (xmax = 0) AS inserted
"""  # noqa: S608


# Lock order of every writer of lead requests: the Event rows first, then the request rows. A
# booking holds its Event row (FOR UPDATE) when the registration trigger upserts the request; a
# transaction that writes a request and rows referencing the event (leads, provenance, audit)
# would otherwise meet the Event row only at COMMIT, where PostgreSQL checks those foreign keys
# (Django's constraints are DEFERRABLE INITIALLY DEFERRED) with FOR KEY SHARE: each would wait
# for the other, a deadlock. Such a transaction takes the key-share lock itself, before it
# touches a request (`hold_events`). FOR KEY SHARE does not block other key-share holders or
# FOR NO KEY UPDATE; it waits for a booking's FOR UPDATE and makes the next one wait.
_HOLD_EVENTS = f"""
    SELECT id FROM {Event._meta.db_table} WHERE id = ANY(%s) ORDER BY id FOR KEY SHARE
"""  # noqa: S608 — table name from model meta; the ids are a parameter


def hold_events(event_ids: Iterable[int]) -> None:
    """Take FOR KEY SHARE on these Event rows (ascending): call before writing lead requests
    in a transaction that also writes rows referencing the events."""
    ids = sorted(set(event_ids))
    if ids:
        with connection.cursor() as cursor:
            cursor.execute(_HOLD_EVENTS, [ids])


def registrations_changed(
    registrations: Iterable[Registration], actor: Any = None, signals: frozenset[str] = frozenset()
) -> None:
    """The core hook, run once registrations were created or changed state and that committed:
    nudge the lead pass when the overlay's trigger wrote a request in that transaction (it then
    put "leads" in `signals`; a request left unwritten already had its pass due)."""
    if "leads" in signals:
        nudge.after_commit(key=NUDGE_KEY, task=PASS_TASK)  # committed: publishes now


def _events_of(rule: LeadRule):
    """Events the rule applies to that have registrations (a rule with neither event nor
    types applies to all)."""
    has_registrations = Exists(Registration.objects.filter(event_id=OuterRef("pk")))
    if rule.event_id is not None:
        events = Event.objects.filter(pk=rule.event_id)
    else:
        types = list(rule.event_types.values_list("pk", flat=True))
        events = Event.objects.filter(event_type_id__in=types) if types else Event.objects.all()
    return events.filter(has_registrations).order_by("pk")


def rule_applies_to(rule: LeadRule, event: Event) -> bool:
    if rule.event_id is not None:
        return rule.event_id == event.pk
    types = set(rule.event_types.values_list("pk", flat=True))
    return not types or event.event_type_id in types


def generate_leads(
    *, event: Event | None = None, rule: LeadRule | None = None, actor: Any
) -> list[LeadRequest]:
    """Staff's "generate leads": queue a walk from the first registration of the event (all its
    rules), of every event the rule applies to (that rule), or of that pair. Returns the
    requests; the pass is nudged after commit."""
    if event is None and rule is None:
        raise ValidationFailed("Generate leads for an event, a rule or both.", field="event")
    if rule is not None and not rule.active:
        raise ValidationFailed(f"Rule {rule.pk} is inactive.", field="rule", rule=rule.pk)
    if event is not None and rule is not None and not rule_applies_to(rule, event):
        raise ValidationFailed(
            f"Rule {rule.pk} does not apply to event {event.pk}.", field="rule", rule=rule.pk
        )
    events = [event] if event is not None else list(_events_of(rule))  # type: ignore[arg-type]
    requests: list[LeadRequest] = []
    with transaction.atomic(), connection.cursor() as cursor:
        hold_events(target.pk for target in events)  # before the requests: the lock order
        for target in events:
            cursor.execute(_UPSERT, [target.pk])
            request_id, inserted = cursor.fetchone()
            request = LeadRequest.objects.select_for_update().get(pk=request_id)
            if rule is None:
                request.rules.clear()  # all rules
            elif inserted or request.rules.exists():
                request.rules.add(rule)  # a subset gains this rule; "all" stays all
            requests.append(request)
        audit.record_many(
            [
                audit.entry(
                    actor=actor,
                    verb="lead_request.queued",
                    event=target.pk,
                    data={"rule": rule.pk if rule is not None else None, "cursor": 0},
                )
                for target in events
            ]
        )
        if events:
            nudge.after_commit(key=NUDGE_KEY, task=PASS_TASK)
    return requests


def relink(*, old_lead_ref: str, new_lead_ref: str, actor: Any = audit.SYSTEM) -> int:
    """Re-point provenance from a lead the host merged away to the surviving one; returns the
    number of provenance rows moved (audited per event)."""
    old, new = (old_lead_ref or "").strip(), (new_lead_ref or "").strip()
    if not old or not new:
        raise ValidationFailed("Both lead refs are required.", field="new_lead_ref")
    if old == new:
        return 0
    with transaction.atomic():
        rows = list(
            LeadProvenance.objects.select_for_update()
            .filter(lead_ref=old)
            .order_by("pk")
            .values_list("pk", "event_id")
        )
        if not rows:
            return 0
        LeadProvenance.objects.filter(pk__in=[pk for pk, _ in rows]).update(lead_ref=new)
        per_event: dict[int, list[int]] = defaultdict(list)
        for pk, event_id in rows:
            per_event[event_id].append(pk)
        audit.record_many(
            [
                audit.entry(
                    actor=actor,
                    verb="lead.relinked",
                    event=event_id,
                    data={"from": old, "to": new, "provenance": pks},
                )
                for event_id, pks in sorted(per_event.items())
            ]
        )
    return len(rows)
