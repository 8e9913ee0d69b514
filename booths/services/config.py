"""Booth categories and template booth lines (`TypeBooth`): the overlay's config rows.

Invariants:
- every write locks the row it changes (a template line: its EventType row first, the lock the
  core's type verbs take), writes, and writes one audit row in the same transaction;
- editing a template line never reaches an event already created from the type (the booths
  were copied once, by `apply_type_booths`);
- a category still used by a booth or a template line is never deleted (`invalid_value`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from django.db import models, transaction

from booths.models import Booth, BoothCategory, TypeBooth
from events.errors import ValidationFailed
from events.models import EventType
from events.services import audit

CATEGORY_FIELDS = frozenset({"name", "sequence", "active", "description", "price", "product_ref"})
TYPE_BOOTH_FIELDS = frozenset({"name", "booth_category"})


def _jsonable(value: Any) -> Any:
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, datetime | date):
        return value.isoformat()
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)


def _check(fields: Mapping[str, Any], editable: frozenset[str]) -> None:
    unknown = sorted(set(fields) - editable)
    if unknown:
        raise ValidationFailed(f"Unknown or read-only fields: {unknown}.", field=unknown[0])
    if "name" in fields and not (fields["name"] or "").strip():
        raise ValidationFailed("A name is required.", field="name")
    if fields.get("price") is not None and fields["price"] < 0:
        raise ValidationFailed("A price cannot be negative.", field="price")


def _apply(row: models.Model, fields: Mapping[str, Any]) -> dict[str, list[Any]]:
    changes = {}
    for name, value in fields.items():
        if getattr(row, name) != value:
            changes[name] = [_jsonable(getattr(row, name)), _jsonable(value)]
            setattr(row, name, value)
    return changes


def _lock_event_type(event_type_id: int) -> EventType:
    return EventType.objects.select_for_update().get(pk=event_type_id)


# --- categories -------------------------------------------------------------------------------


def create_booth_category(*, actor: Any, **fields: Any) -> BoothCategory:
    _check(fields, CATEGORY_FIELDS)
    with transaction.atomic():
        category = BoothCategory(**fields)
        category.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="booth_category.created",
            data={"id": category.pk, **{k: _jsonable(v) for k, v in fields.items()}},
        )
    return category


def update_booth_category(*, category: BoothCategory, actor: Any, **fields: Any) -> BoothCategory:
    _check(fields, CATEGORY_FIELDS)
    with transaction.atomic():
        category = BoothCategory.objects.select_for_update().get(pk=category.pk)
        changes = _apply(category, fields)
        if changes:
            category.save(update_fields=list(changes))
            audit.record(
                actor=actor, verb="booth_category.updated", data={"id": category.pk, **changes}
            )
    return category


def delete_booth_category(*, category: BoothCategory, actor: Any) -> None:
    with transaction.atomic():
        category = BoothCategory.objects.select_for_update().get(pk=category.pk)
        if (
            Booth.objects.filter(booth_category=category).exists()
            or TypeBooth.objects.filter(booth_category=category).exists()
        ):
            raise ValidationFailed(
                f"{category} is used by booths or template lines; archive it instead.",
                field="id",
                id=category.pk,
            )
        audit.record(
            actor=actor,
            verb="booth_category.deleted",
            data={"id": category.pk, "name": category.name},
        )
        category.delete()


# --- template lines ---------------------------------------------------------------------------


def create_type_booth(*, event_type: EventType, actor: Any, **fields: Any) -> TypeBooth:
    _check(fields, TYPE_BOOTH_FIELDS)
    with transaction.atomic():
        _lock_event_type(event_type.pk)
        line = TypeBooth(event_type_id=event_type.pk, **fields)
        line.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="type_booth.created",
            data={
                "id": line.pk,
                "event_type": event_type.pk,
                **{k: _jsonable(v) for k, v in fields.items()},
            },
        )
    return line


def update_type_booth(*, line: TypeBooth, actor: Any, **fields: Any) -> TypeBooth:
    _check(fields, TYPE_BOOTH_FIELDS)
    with transaction.atomic():
        _lock_event_type(line.event_type_id)
        line = TypeBooth.objects.select_for_update().get(pk=line.pk)
        changes = _apply(line, fields)
        if changes:
            line.save(update_fields=list(changes))
            audit.record(
                actor=actor,
                verb="type_booth.updated",
                data={"id": line.pk, "event_type": line.event_type_id, **changes},
            )
    return line


def delete_type_booth(*, line: TypeBooth, actor: Any) -> None:
    with transaction.atomic():
        _lock_event_type(line.event_type_id)
        line = TypeBooth.objects.select_for_update().get(pk=line.pk)
        audit.record(
            actor=actor,
            verb="type_booth.deleted",
            data={"id": line.pk, "event_type": line.event_type_id, "name": line.name},
        )
        line.delete()
