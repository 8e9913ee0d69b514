"""The booths overlay's part of `manage.py seed_demo`: booth categories and booth lines on the
demo type (`seed_demo_type`), and some bookings on the demo summit (`seed_demo`)."""

from decimal import Decimal
from typing import Any

from booths import services
from booths.models import Booth, BoothBooking, BoothCategory, TypeBooth
from events.services.audit import Actor

ACTOR = Actor("system", label="seed_demo")


def seed_demo_type(event_type) -> None:
    """Booth lines for the demo event type (called once, when seed_demo creates the type)."""
    standard, _ = BoothCategory.objects.get_or_create(
        name="Standard booth (3×3 m)",
        defaults={"price": Decimal("900.00"), "product_ref": "PROD-BOOTH-STD", "sequence": 1},
    )
    premium, _ = BoothCategory.objects.get_or_create(
        name="Premium booth (6×3 m, corner)",
        defaults={"price": Decimal("2400.00"), "product_ref": "PROD-BOOTH-PRM", "sequence": 2},
    )
    for i in range(1, 5):
        TypeBooth.objects.create(
            event_type=event_type, booth_category=standard, name=f"Hall A – stand {i}"
        )
    TypeBooth.objects.create(
        event_type=event_type, booth_category=premium, name="Hall A – corner stand"
    )


RENTERS = [
    # order, partner, contact
    ("SO-2060", "P-1010", {"name": "Acme Hosting", "email": "booth@acme.example", "phone": ""}),
    ("SO-2061", "P-1011", {"name": "Orbit Data", "email": "events@orbit.example", "phone": ""}),
    ("SO-2062", "P-1012", {"name": "Nimbus Labs", "email": "hello@nimbus.example", "phone": ""}),
    ("SO-2063", "P-1013", {"name": "Quill Docs", "email": "team@quill.example", "phone": ""}),
]


def seed_demo(*, summit, stdout=None, **_: Any) -> None:
    """The demo summit's booths (copied from the type): one booked and paid, one booked after a
    competing request (cancelled), one requested (pending), the rest free. Once only."""
    booths = list(Booth.objects.filter(event=summit).order_by("pk"))
    if len(booths) < 3 or BoothBooking.objects.filter(booth__event=summit).exists():
        return
    acme, orbit, nimbus, quill = RENTERS
    first = _request(booths[0], *acme)
    services.confirm_booking(booking=first, actor=ACTOR)
    services.mark_order_booths_paid(order_ref=acme[0], actor=ACTOR)
    second = _request(booths[1], *orbit)
    _request(booths[1], *nimbus)
    services.confirm_booking(booking=second, actor=ACTOR)  # cancels Nimbus Labs' request
    _request(booths[2], *quill)
    if stdout is not None:
        stdout.write(f"booths: {len(booths)} on '{summit.name}', 2 booked, 1 requested")


def _request(booth: Booth, order_ref: str, partner_ref: str, contact: dict) -> BoothBooking:
    return services.request_booking(
        booth=booth,
        order_ref=order_ref,
        order_line_ref=f"{order_ref}/1",
        partner_ref=partner_ref,
        contact=contact,
        actor=ACTOR,
    )
