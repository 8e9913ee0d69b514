"""The booths overlay's part of `manage.py seed_demo`: booth categories and booth lines."""

from decimal import Decimal

from booths.models import BoothCategory, TypeBooth


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
