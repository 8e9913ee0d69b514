"""Reference data verbs: stages, tag categories and tags (spec.md §2.1, §9).

Invariants:
- every write locks the row it changes (or, on delete, the row it removes), writes, and writes
  exactly one audit row (`stage.created`, `tag.updated`, `tag_category.deleted`, …) in the same
  transaction; an edit that changes nothing writes nothing and audits nothing;
- a row still referenced (a stage events sit in, a category with tags) is never deleted: the
  refusal is typed (`invalid_value`) and nothing is written.

`apply_fields` is the one "diff, set, report" step the config verbs share (tickets, questions,
event types, templates): it names what changed, in the audit row's `[before, after]` shape.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import date, datetime
from typing import Any, TypeVar

from django.db import models, transaction

from events import i18n
from events.db import locks
from events.errors import ValidationFailed
from events.models import Event, Stage, Tag, TagCategory
from events.services import audit

M = TypeVar("M", bound=models.Model)

STAGE_FIELDS = frozenset({"name", "description", "sequence", "fold", "pipe_end", "is_cancelled"})
TAG_CATEGORY_FIELDS = frozenset({"name", "sequence"})
TAG_FIELDS = frozenset({"name", "category", "sequence", "color"})


def jsonable(value: Any) -> Any:
    """A value as the audit row stores it (rows by pk, dates ISO, decimals as text)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, models.Model):
        return value.pk
    if isinstance(value, str | int | float | bool | type(None) | dict):
        return value
    return str(value)


def check_fields(fields: Mapping[str, Any], editable: Collection[str]) -> None:
    unknown = set(fields) - set(editable)
    if unknown:
        raise ValidationFailed(
            f"Unknown or read-only fields: {sorted(unknown)}.",
            field=sorted(unknown)[0],
        )


def check_texts(fields: dict[str, Any], model: type[models.Model]) -> None:
    """`fields["translations"]`, when given, made a clean translations document of the model
    (events.i18n: product languages, the model's translated fields, text); `invalid_value`
    naming `translations` otherwise. An event's `lang` must be a product language."""
    if "translations" in fields:
        try:
            fields["translations"] = i18n.clean_translations(
                fields["translations"], fields=i18n.TRANSLATED_FIELDS[model._meta.label_lower]
            )
        except ValueError as exc:
            raise ValidationFailed(str(exc), code="invalid_value", field="translations") from None
    if "lang" in fields and i18n.supported(fields["lang"]) is None:
        raise ValidationFailed(
            f"lang must be one of {', '.join(i18n.LANGUAGE_CODES)}.",
            code="invalid_value",
            field="lang",
        )


def apply_fields(obj: models.Model, fields: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Set the fields that differ on `obj`; returns {field: [before, after]} of those."""
    changes: dict[str, list[Any]] = {}
    for name, value in fields.items():
        current = getattr(obj, name)
        if current != value:
            changes[name] = [jsonable(current), jsonable(value)]
            setattr(obj, name, value)
    return changes


def create_row(
    model: type[M], *, verb: str, actor: Any, fields: Mapping[str, Any], editable: Collection[str]
) -> M:
    """Insert one reference row and its audit entry (nothing to lock: the row is new)."""
    check_fields(fields, editable)
    with transaction.atomic():
        row = model(**fields)
        row.save(force_insert=True)
        audit.record(
            actor=actor,
            verb=verb,
            data={"id": row.pk, **{k: jsonable(v) for k, v in fields.items()}},
        )
    return row


def update_row(
    model: type[M],
    *,
    pk: int,
    verb: str,
    actor: Any,
    fields: Mapping[str, Any],
    editable: Collection[str],
    also_lock: Callable[[M], object] | None = None,
) -> M:
    """Lock the row (then what `also_lock(row)` locks), set the fields that differ, audit."""
    check_fields(fields, editable)
    with transaction.atomic():
        row = model._default_manager.select_for_update().get(pk=pk)
        if also_lock is not None:
            also_lock(row)
        changes = apply_fields(row, fields)
        if not changes:
            return row
        row.save(update_fields=list(changes))
        audit.record(actor=actor, verb=verb, data={"id": row.pk, **changes})
    return row


def _delete_row(model: type[models.Model], *, pk: int, verb: str, actor: Any, in_use) -> None:
    with transaction.atomic():
        row = model._default_manager.select_for_update().get(pk=pk)
        reason = in_use(row)
        if reason:
            raise ValidationFailed(f"{row} {reason}; it cannot be deleted.", field="id", id=pk)
        audit.record(actor=actor, verb=verb, data={"id": pk, "name": str(row)})
        row.delete()


# --- stages ---------------------------------------------------------------------------------


def _check_cancelled_ends(*, pipe_end: bool, is_cancelled: bool) -> None:
    """A cancelled stage is an ending one (the database checks it too): refused, not a 500."""
    if is_cancelled and not pipe_end:
        raise ValidationFailed(
            "A cancelled stage must be an ending stage (pipe_end).", field="is_cancelled"
        )


def create_stage(*, actor: Any, **fields: Any) -> Stage:
    _check_cancelled_ends(
        pipe_end=bool(fields.get("pipe_end")), is_cancelled=bool(fields.get("is_cancelled"))
    )
    return create_row(
        Stage, verb="stage.created", actor=actor, fields=fields, editable=STAGE_FIELDS
    )


def update_stage(*, stage: Stage, actor: Any, **fields: Any) -> Stage:
    """A stage's `pipe_end` is one of its events' booking inputs (registrations close in an
    ending stage; events.db.booking.read_inputs): changing it locks those events too,
    ascending, after the Stage row, as every other verb changing a booking input takes the
    Event lock.

    The Stage row's FOR UPDATE conflicts with the key-share lock an event moving into the stage
    (or created in it) takes on it, so the events listed under it are all the stage's events.
    `is_cancelled` needs no lock of its own: a cancelled stage stays an ending one (checked on
    the locked row), so flipping it never opens or closes an event.
    """

    def check_and_lock_its_events(row: Stage) -> None:
        _check_cancelled_ends(
            pipe_end=fields.get("pipe_end", row.pipe_end),
            is_cancelled=fields.get("is_cancelled", row.is_cancelled),
        )
        if "pipe_end" in fields and fields["pipe_end"] != row.pipe_end:
            locks.lock_events(Event.objects.filter(stage_id=row.pk).values_list("pk", flat=True))

    return update_row(
        Stage,
        pk=stage.pk,
        verb="stage.updated",
        actor=actor,
        fields=fields,
        editable=STAGE_FIELDS,
        also_lock=check_and_lock_its_events,
    )


def delete_stage(*, stage: Stage, actor: Any) -> None:
    """Refused while any event sits in the stage (events point at it, PROTECT)."""
    _delete_row(
        Stage,
        pk=stage.pk,
        verb="stage.deleted",
        actor=actor,
        in_use=lambda s: "has events" if s.events.exists() else "",
    )


# --- tag categories and tags ----------------------------------------------------------------


def create_tag_category(*, actor: Any, **fields: Any) -> TagCategory:
    return create_row(
        TagCategory,
        verb="tag_category.created",
        actor=actor,
        fields=fields,
        editable=TAG_CATEGORY_FIELDS,
    )


def update_tag_category(*, category: TagCategory, actor: Any, **fields: Any) -> TagCategory:
    return update_row(
        TagCategory,
        pk=category.pk,
        verb="tag_category.updated",
        actor=actor,
        fields=fields,
        editable=TAG_CATEGORY_FIELDS,
    )


def delete_tag_category(*, category: TagCategory, actor: Any) -> None:
    """Refused while the category holds tags (delete or move them first)."""
    _delete_row(
        TagCategory,
        pk=category.pk,
        verb="tag_category.deleted",
        actor=actor,
        in_use=lambda c: "has tags" if c.tags.exists() else "",
    )


def _check_color(fields: Mapping[str, Any]) -> None:
    color = fields.get("color")
    if color is not None and not 0 <= color <= 11:
        raise ValidationFailed("A tag color is 0 to 11.", field="color")


def create_tag(*, actor: Any, **fields: Any) -> Tag:
    _check_color(fields)
    return create_row(Tag, verb="tag.created", actor=actor, fields=fields, editable=TAG_FIELDS)


def update_tag(*, tag: Tag, actor: Any, **fields: Any) -> Tag:
    _check_color(fields)
    return update_row(
        Tag, pk=tag.pk, verb="tag.updated", actor=actor, fields=fields, editable=TAG_FIELDS
    )


def delete_tag(*, tag: Tag, actor: Any) -> None:
    """A tag leaves the events and event types that carry it (their M2M rows cascade)."""
    _delete_row(Tag, pk=tag.pk, verb="tag.deleted", actor=actor, in_use=lambda t: "")


def set_event_tags(*, event: Event, tags: Iterable[Tag], actor: Any) -> Event:
    """An event's tags, under its Event lock; one `event.retagged` audit row when they change."""
    after = sorted({t.pk for t in tags})
    with transaction.atomic():
        locked = locks.lock_event(event.pk)
        before = sorted(locked.tags.values_list("pk", flat=True))
        if before != after:
            locked.tags.set(after)
            audit.record(
                actor=actor, verb="event.retagged", event=locked, data={"tags": [before, after]}
            )
    return locked
