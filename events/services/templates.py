"""The built-in template store's write verbs (spec.md §6.3, §11).

Deleting a template deletes, in the same transaction, every scheduler (event `Mail` and
`TypeMail` line) that references it, through `scheduler.on_template_deleted`; all audited.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events.errors import NotFound
from events.models import MessageTemplate
from events.services import audit, scheduler


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
