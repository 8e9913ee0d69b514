"""The booths catalog read (`GET /api/v1/catalog/booths?event=<id>`, served by the seam's
view through `events.hooks.catalogs["booths"]`): what a host needs to sell booths — each
booth's id (the seam's `booth_ids`), name, category with its price, currency (the event's) and
product ref, and whether it can be had now. One query whatever the number of booths."""

from __future__ import annotations

from typing import Any

from booths import selectors
from booths.models import BoothState
from events.models import Event


def booth_rows(*, event: Event) -> list[dict[str, Any]]:
    """One JSON-ready row per booth of `event` (a published, active event: the caller checked).
    `available` is false for a booked or blocked booth; pending requests (quotations) leave a
    booth available, as several may coexist until one is confirmed."""
    return [
        {
            "booth_id": booth.pk,
            "name": booth.name,
            "state": booth.state,
            "available": booth.state == BoothState.AVAILABLE,
            "category": {
                "id": booth.booth_category_id,
                "name": booth.booth_category.name,
                "price": str(booth.booth_category.price),
                "currency": event.currency,
                "product_ref": booth.booth_category.product_ref,
            },
        }
        for booth in selectors.catalog_booths(event_id=event.pk)
    ]
