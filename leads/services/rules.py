"""Lead rules: create and update them through the closed vocabulary (spec-overlay.md §3.1).

Invariants:
- every predicate is validated (`vocabulary.validate_predicates`) against the rule's scope
  before anything is written; a refusal writes nothing;
- predicates are stored in their canonical form, so a rule read back and saved again is
  unchanged (and an update that changes nothing writes nothing, not even an audit row);
- each verb writes its audit row in the same transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from django.db import transaction

from events.errors import ValidationFailed
from events.models import Event, EventType
from events.services import audit
from leads.models import LeadBasis, LeadRule, LeadRulePredicate, LeadTrigger, LeadType
from leads.services import vocabulary

SIMPLE_FIELDS = (
    "name",
    "active",
    "lead_creation_basis",
    "lead_creation_trigger",
    "lead_type",
    "event",
    "team_ref",
    "user_ref",
    "tag_refs",
)
UPDATABLE = frozenset(SIMPLE_FIELDS) | {"event_types", "predicates"}


def predicates_of(rule: LeadRule) -> list[dict[str, Any]]:
    """The rule's predicates as mappings, in their order (what `update_rule` takes back)."""
    return [{"field": p.field, "op": p.op, "value": p.value} for p in rule.predicates.all()]


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValidationFailed(
            f"{name} must be one of {list(choices)}.", field=name, allowed=list(choices)
        )


def _clean_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(fields)
    if "name" in out:
        out["name"] = (out["name"] or "").strip()
        if not out["name"]:
            raise ValidationFailed("A rule needs a name.", field="name")
    if "lead_creation_basis" in out:
        _check_choice("lead_creation_basis", out["lead_creation_basis"], LeadBasis.values)
    if "lead_creation_trigger" in out:
        _check_choice("lead_creation_trigger", out["lead_creation_trigger"], LeadTrigger.values)
    if "lead_type" in out:
        _check_choice("lead_type", out["lead_type"], LeadType.values)
    if "tag_refs" in out:
        tags = out["tag_refs"]
        if isinstance(tags, str) or not all(isinstance(t, str) and t.strip() for t in tags):
            raise ValidationFailed("tag_refs is a list of non-empty strings.", field="tag_refs")
        out["tag_refs"] = [t.strip() for t in tags]
    for ref in ("team_ref", "user_ref"):
        if ref in out:
            out[ref] = (out[ref] or "").strip()
    for name in ("name", "team_ref", "user_ref"):
        if name in out and not vocabulary.printable(out[name]):
            raise ValidationFailed(f"{name} must not contain control characters.", field=name)
    if "tag_refs" in out and not all(vocabulary.printable(t) for t in out["tag_refs"]):
        raise ValidationFailed("tag_refs must not contain control characters.", field="tag_refs")
    if "event" in out and out["event"] is not None and not isinstance(out["event"], Event):
        out["event"] = Event.objects.get(pk=out["event"])
    return out


def _type_ids(event_types: Iterable[EventType | int]) -> list[int]:
    return sorted({t.pk if isinstance(t, EventType) else int(t) for t in event_types})


def _write_predicates(rule: LeadRule, canonical: list[dict[str, Any]]) -> None:
    LeadRulePredicate.objects.bulk_create(
        [LeadRulePredicate(rule=rule, sequence=(i + 1) * 10, **p) for i, p in enumerate(canonical)]
    )


def create_rule(
    *,
    name: str,
    lead_creation_basis: str,
    lead_creation_trigger: str,
    lead_type: str,
    event: Event | int | None = None,
    event_types: Iterable[EventType | int] = (),
    team_ref: str = "",
    user_ref: str = "",
    tag_refs: Iterable[str] = (),
    predicates: Iterable[Mapping[str, Any]] = (),
    actor: Any,
    active: bool = True,
) -> LeadRule:
    """A new rule with its predicates (validated and stored canonical)."""
    fields = _clean_fields(
        {
            "name": name,
            "active": active,
            "lead_creation_basis": lead_creation_basis,
            "lead_creation_trigger": lead_creation_trigger,
            "lead_type": lead_type,
            "event": event,
            "team_ref": team_ref,
            "user_ref": user_ref,
            "tag_refs": list(tag_refs),
        }
    )
    type_ids = _type_ids(event_types)
    scope = vocabulary.scope_of(event=fields["event"], event_types=type_ids)
    canonical = vocabulary.validate_predicates(list(predicates), scope=scope)
    with transaction.atomic():
        rule = LeadRule.objects.create(**fields)
        if type_ids:
            rule.event_types.set(type_ids)
        _write_predicates(rule, canonical)
        audit.record(
            actor=actor,
            verb="lead_rule.created",
            event=rule.event_id,
            data={
                "rule": rule.pk,
                "name": rule.name,
                "basis": rule.lead_creation_basis,
                "trigger": rule.lead_creation_trigger,
                "event_types": type_ids,
                "predicates": canonical,
            },
        )
    return rule


def update_rule(*, rule: LeadRule, actor: Any, **fields: Any) -> LeadRule:
    """Change a rule's fields, event types and/or predicates; the predicates (given or kept)
    are validated against the rule's new scope. Nothing changes → nothing is written."""
    unknown = set(fields) - UPDATABLE
    if unknown:
        raise ValidationFailed(f"Unknown rule fields {sorted(unknown)}.", field=sorted(unknown)[0])
    cleaned = _clean_fields({k: v for k, v in fields.items() if k in SIMPLE_FIELDS})
    with transaction.atomic():
        current = LeadRule.objects.select_for_update().get(pk=rule.pk)
        old_types = sorted(current.event_types.values_list("pk", flat=True))
        new_types = _type_ids(fields["event_types"]) if "event_types" in fields else old_types
        old_predicates = predicates_of(current)
        event = cleaned.get("event", current.event) if "event" in cleaned else current.event
        scope = vocabulary.scope_of(event=event, event_types=new_types)
        given = fields["predicates"] if "predicates" in fields else old_predicates
        canonical = vocabulary.validate_predicates(list(given), scope=scope)

        changes: dict[str, list[Any]] = {}
        for name, value in cleaned.items():
            before = getattr(current, name)
            if name == "event":
                before, value = current.event_id, (value.pk if value is not None else None)
                if before != value:
                    changes[name] = [before, value]
                    current.event_id = value
                continue
            if before != value:
                changes[name] = [before, value]
                setattr(current, name, value)
        if new_types != old_types:
            changes["event_types"] = [old_types, new_types]
        if canonical != old_predicates:
            changes["predicates"] = [old_predicates, canonical]
        if not changes:
            return current
        simple = [name for name in changes if name in SIMPLE_FIELDS]
        if simple:
            current.save(update_fields=simple)
        if "event_types" in changes:
            current.event_types.set(new_types)
        if "predicates" in changes:
            current.predicates.all().delete()
            _write_predicates(current, canonical)
        audit.record(
            actor=actor,
            verb="lead_rule.updated",
            event=current.event_id,
            data={"rule": current.pk, **changes},
        )
    return current


def delete_rule(*, rule: LeadRule, actor: Any) -> None:
    """Delete a rule; its provenance goes with it (the leads stay in the host CRM)."""
    with transaction.atomic():
        current = LeadRule.objects.select_for_update().get(pk=rule.pk)
        audit.record(
            actor=actor,
            verb="lead_rule.deleted",
            event=current.event_id,
            data={"rule": current.pk, "name": current.name},
        )
        current.delete()
