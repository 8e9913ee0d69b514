"""Booths overlay schema (spec-overlay.md §2.1)."""

from django.db import models
from django.db.models import Q

from events.models import Event, EventType


class BoothState(models.TextChoices):
    AVAILABLE = "available", "Available"
    UNAVAILABLE = "unavailable", "Unavailable"


class BookingState(models.TextChoices):
    PENDING = "pending", "Pending"
    CONFIRMED = "confirmed", "Confirmed"
    CANCELLED = "cancelled", "Cancelled"


class BoothCategory(models.Model):
    name = models.CharField(max_length=255)
    sequence = models.IntegerField(default=10)
    active = models.BooleanField(default=True)
    description = models.TextField(blank=True)
    price = models.DecimalField(max_digits=12, decimal_places=2, default=0)
    product_ref = models.CharField(max_length=128, blank=True)

    class Meta:
        ordering = ("sequence", "name")
        verbose_name = "booth category"
        verbose_name_plural = "booth categories"
        constraints = [
            models.CheckConstraint(condition=Q(price__gte=0), name="booth_category_price"),
        ]

    def __str__(self) -> str:
        return self.name


class TypeBooth(models.Model):
    event_type = models.ForeignKey(EventType, on_delete=models.CASCADE, related_name="booths")
    booth_category = models.ForeignKey(BoothCategory, on_delete=models.PROTECT, related_name="+")
    name = models.CharField(max_length=255)

    class Meta:
        ordering = ("id",)
        verbose_name = "template booth"
        verbose_name_plural = "template booths"

    def __str__(self) -> str:
        return self.name


class Booth(models.Model):
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="booths")
    booth_category = models.ForeignKey(
        BoothCategory, on_delete=models.PROTECT, related_name="booths"
    )
    name = models.CharField(max_length=255)
    state = models.CharField(
        max_length=12, choices=BoothState.choices, default=BoothState.AVAILABLE
    )
    partner_ref = models.CharField(max_length=128, blank=True)
    contact_name = models.CharField(max_length=255, blank=True)
    contact_email = models.CharField(max_length=254, blank=True)
    contact_phone = models.CharField(max_length=32, blank=True)
    is_paid = models.BooleanField(default=False)
    order_ref = models.CharField(max_length=128, blank=True, db_index=True)
    order_line_ref = models.CharField(max_length=128, blank=True)

    class Meta:
        ordering = ("event", "name")
        verbose_name = "booth"
        verbose_name_plural = "booths"

    def __str__(self) -> str:
        return self.name


class BoothBooking(models.Model):
    booth = models.ForeignKey(Booth, on_delete=models.CASCADE, related_name="bookings")
    order_ref = models.CharField(max_length=128, blank=True, db_index=True)
    order_line_ref = models.CharField(max_length=128, blank=True)
    partner_ref = models.CharField(max_length=128, blank=True)
    contact_name = models.CharField(max_length=255, blank=True)
    contact_email = models.CharField(max_length=254, blank=True)
    contact_phone = models.CharField(max_length=32, blank=True)
    state = models.CharField(
        max_length=10, choices=BookingState.choices, default=BookingState.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "id")
        verbose_name = "booth booking"
        verbose_name_plural = "booth bookings"
        constraints = [
            models.UniqueConstraint(
                fields=["booth"],
                condition=Q(state="confirmed"),
                name="one_confirmed_booking_per_booth",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.booth} ← {self.order_ref or 'staff block'} ({self.state})"
