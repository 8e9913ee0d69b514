"""The booths overlay's handler for booth lines of host sale orders (spec-overlay.md §1.4).

Shaped for the seam's hook `events.hooks.sale_order_lines["booth"]`: it is called inside the
seam's transaction with the message's order (`ref`, `partner`) and its booth lines (`ref`,
`booth_ids`); a DomainError it raises rolls the whole message back (the seam parks it):

- "confirm" (`order.confirmed`, and the heal of `order.paid`): every booth of the lines is
  confirmed for the order, or none (`booth_unavailable` naming the booths); an unknown booth id
  is `unknown_reference` naming the line;
- "paid": `is_paid` on the booths the order holds;
- "cancel": the order's booths are released and its pending bookings cancelled.

Every branch is idempotent, so a replayed or healed message changes nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from booths import selectors
from booths.services import confirm_order_booths, mark_order_booths_paid, release_order_booths
from events.errors import DomainError

UNKNOWN_REFERENCE = "unknown_reference"  # the seam's code (seams.errors), named, not imported


def sale_order_lines(*, effect: str, order: Any, lines: Sequence[Any], actor: Any) -> dict:
    if effect == "cancel":
        released = release_order_booths(order_ref=order.ref, actor=actor)
        return {"booths_released": released.released_booths}
    if effect == "paid":
        return {"booths_paid": mark_order_booths_paid(order_ref=order.ref, actor=actor)}
    if effect != "confirm":
        raise ValueError(f"unknown sale effect {effect!r}")
    if not lines:
        return {"booths_confirmed": []}
    unknown = set(selectors.missing_booths(booth_ids=[i for ln in lines for i in ln.booth_ids]))
    all_lines = list(getattr(order, "lines", lines))
    for line in lines:
        missing = sorted(unknown.intersection(line.booth_ids))
        if missing:
            index = all_lines.index(line) if line in all_lines else list(lines).index(line)
            raise DomainError(
                f"Line {line.ref}: there is no booth {', '.join(map(str, missing))}.",
                code=UNKNOWN_REFERENCE,
                path=f"data.order.lines[{index}].booth_ids",
                line=line.ref,
                booths=missing,
            )
    partner = order.partner
    result = confirm_order_booths(
        order_ref=order.ref,
        lines=[{"ref": line.ref, "booth_ids": list(line.booth_ids)} for line in lines],
        partner_ref=partner.ref,
        contact={"name": partner.name, "email": partner.email, "phone": partner.phone},
        actor=actor,
    )
    return {
        "booths_confirmed": [b.booth_id for b in result.confirmed],
        "cancelled_order_refs": result.cancelled_order_refs,
    }
