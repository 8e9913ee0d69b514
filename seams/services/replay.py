"""`replay`: apply a parked inbox message again, after staff fixed the cause (§1.5).

Invariants:
- the inbox row is locked first, so two replays of one message never both apply it;
- only a `parked` row is applied; any other status is answered as it is, with no effect, so
  a second replay changes nothing;
- success marks the row `applied` (or `stale` when a later version of the order was applied
  meanwhile); a new business refusal keeps it `parked` with the new error. Audited.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from events.errors import NotFound
from events.services import audit
from seams.messages import parse
from seams.models import InboxStatus, SeamInbox
from seams.services.receive import SeamResult, apply_recorded


def replay(*, inbox_id: int, actor: Any) -> SeamResult:
    with transaction.atomic():
        row = SeamInbox.objects.select_for_update().filter(pk=inbox_id).first()
        if row is None:
            raise NotFound(f"There is no inbox message {inbox_id}.", inbox=inbox_id)
        if row.status != InboxStatus.PARKED:
            return SeamResult(row.status, 200, {"status": row.status, "replayed": False}, row.pk)
        message = parse(row.body)
        result = apply_recorded(row.pk, message, actor)
        audit.record(
            actor=actor,
            verb="seam_message.replayed",
            data={
                "inbox": row.pk,
                "type": row.type,
                "order": row.order_ref,
                "status": result.status,
            },
        )
    return result
