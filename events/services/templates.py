"""The built-in template store's write verbs (spec.md §6.3, §11).

Every write locks the template row (a new one: nothing to lock), writes, and writes exactly one
audit row (`template.created` / `template.updated` / `template.deleted`) in the same transaction.
A template's `ref` is what schedulers name: it cannot change while any scheduler (event `Mail`
or `TypeMail` line) still names it, and its channel cannot change under them either.
Deleting a template deletes, in the same transaction, every scheduler (event `Mail` and
`TypeMail` line) that references it, through `scheduler.on_template_deleted`; all audited.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events.errors import NotFound, ValidationFailed
from events.models import Mail, MessageTemplate, TypeMail
from events.services import audit, scheduler
from events.services.reference import apply_fields, check_fields, check_texts, jsonable

TEMPLATE_FIELDS = frozenset({"ref", "name", "channel", "subject", "body", "translations"})


def _check_syntax(fields: dict[str, Any]) -> None:
    """A template that does not compile, in any of its languages, is refused before it reaches
    a scheduler pass."""
    from django.template import Template, TemplateSyntaxError

    check_texts(fields, MessageTemplate)
    texts = [("body", fields.get("body")), ("subject", fields.get("subject"))]
    for lang, translated in (fields.get("translations") or {}).items():
        texts += [(f"translations.{lang}.{name}", text) for name, text in translated.items()]
    for field, text in texts:
        if text is None:
            continue
        try:
            Template(text)
        except TemplateSyntaxError as exc:
            raise ValidationFailed(f"Template syntax error: {exc}", field=field) from None


def _in_use(ref: str) -> bool:
    return (
        Mail.objects.filter(template_ref=ref).exists()
        or TypeMail.objects.filter(template_ref=ref).exists()
    )


def create_template(*, actor: Any, **fields: Any) -> MessageTemplate:
    check_fields(fields, TEMPLATE_FIELDS)
    _check_syntax(fields)
    with transaction.atomic():
        if MessageTemplate.objects.filter(ref=fields.get("ref")).exists():
            raise ValidationFailed(f"A template {fields.get('ref')!r} exists already.", field="ref")
        template = MessageTemplate(**fields)
        template.save(force_insert=True)
        audit.record(
            actor=actor,
            verb="template.created",
            data={
                "template": template.pk,
                **{k: jsonable(v) for k, v in fields.items() if k != "body"},
            },
        )
    return template


def update_template(*, template: MessageTemplate, actor: Any, **fields: Any) -> MessageTemplate:
    """Edit a template; the audit row names the changed fields (a body edit by size only)."""
    check_fields(fields, TEMPLATE_FIELDS)
    _check_syntax(fields)
    with transaction.atomic():
        locked = MessageTemplate.objects.select_for_update().get(pk=template.pk)
        before_ref = locked.ref
        changes = apply_fields(locked, fields)
        if not changes:
            return locked
        if ("ref" in changes or "channel" in changes) and _in_use(before_ref):
            field = "ref" if "ref" in changes else "channel"
            raise ValidationFailed(
                f"Schedulers use {before_ref!r}: its {field} cannot change.", field=field
            )
        locked.save(update_fields=[*changes, "updated_at"])
        if "body" in changes:
            changes["body"] = [len(changes["body"][0]), len(changes["body"][1])]
        audit.record(actor=actor, verb="template.updated", data={"template": locked.pk, **changes})
    return locked


def delete_template(*, template_ref: str, actor: Any) -> int:
    """Delete the template and its schedulers; returns the number of schedulers deleted."""
    with transaction.atomic():
        template = MessageTemplate.objects.select_for_update().filter(ref=template_ref).first()
        if template is None:
            raise NotFound(f"Template {template_ref!r} does not exist.", template_ref=template_ref)
        count = scheduler.on_template_deleted(template_ref=template_ref, actor=actor)
        audit.record(
            actor=actor,
            verb="template.deleted",
            data={
                "template_ref": template_ref,
                "name": template.name,
                "channel": template.channel,
                "schedulers_deleted": count,
            },
        )
        template.delete()
    return count
