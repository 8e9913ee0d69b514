"""The booths overlay's handler for booth lines of host sale orders (spec-overlay.md §1.4).

Shaped for the seam's hook `events.hooks.sale_order_lines["booth"]`: it is called inside the
seam's transaction with the message's order (`ref`, `partner`) and its booth lines (`ref`,
`booth_ids`); a DomainError it raises rolls the whole message back (the seam parks it). What
it did is returned as `{"booths": {…}}` for the seam's answer (nothing when it did nothing):

- "confirm" (`order.confirmed`, and the heal of `order.paid`): every booth of the lines is
  confirmed for the order, or none (`booth_unavailable` naming the booths); an unknown booth id
  is `unknown_reference` naming the line. With `later` (a version of the order was applied
  before: the lines are its whole truth) the order's booths that no line names any more are
  released. Reported: `confirmed`, `released`, `cancelled_order_refs` (other orders whose
  pending requests lost their booth);
- "paid": `is_paid` on the booths the order holds (`paid`);
- "cancel": the order's booths are released and its pending bookings cancelled (`released`).

Every branch is idempotent, so a replayed or healed message changes nothing twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from booths import selectors
from booths.services import confirm_order_booths, mark_order_booths_paid, release_order_booths
from events.errors import DomainError

UNKNOWN_REFERENCE = "unknown_reference"  # the seam's code (seams.errors), named, not imported


def sale_order_lines(
    *, effect: str, order: Any, lines: Sequence[Any], actor: Any, later: bool = False
) -> dict[str, Any]:
    if effect == "cancel":
        released = release_order_booths(order_ref=order.ref, actor=actor)
        return _reported(released=released.released_booths)
    if effect == "paid":
        return _reported(paid=mark_order_booths_paid(order_ref=order.ref, actor=actor))
    if effect != "confirm":
        raise ValueError(f"unknown sale effect {effect!r}")
    if not lines and not later:
        return {}
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
        release_missing=later,
    )
    if not lines and not result.released:
        return {}
    return {
        "booths": {
            "confirmed": [b.booth_id for b in result.confirmed],
            "released": result.released,
            "cancelled_order_refs": result.cancelled_order_refs,
        }
    }


def _reported(**changes: list[int]) -> dict[str, Any]:
    """`{"booths": changes}`, or nothing when no booth changed."""
    return {"booths": changes} if any(changes.values()) else {}
