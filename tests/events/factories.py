"""factory-boy factories for every core model (overlay factories live in tests/<app>/).

They write rows directly (fixtures of a given shape); tests of behaviour go through services.
Registrations made here in a seat-holding state also book their seats in the ledger through
the seat module, so the ledger stays consistent with the rows (see RegistrationFactory).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from events import models as ev

BASE = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"staff{n}")
    email = factory.LazyAttribute(lambda o: f"{o.username}@example.org")
    is_staff = True
    password = factory.django.Password("pw-for-tests-only")


def stage(name: str = "New") -> ev.Stage:
    return ev.Stage.objects.get(name=name)


class StageFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Stage

    name = factory.Sequence(lambda n: f"Stage {n}")
    sequence = factory.Sequence(lambda n: 10 + n)


class TagCategoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.TagCategory

    name = factory.Sequence(lambda n: f"Category {n}")


class TagFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Tag

    name = factory.Sequence(lambda n: f"Tag {n}")
    category = factory.SubFactory(TagCategoryFactory)
    color = 3


class EventTypeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.EventType

    name = factory.Sequence(lambda n: f"Type {n}")
    default_timezone = "Europe/Brussels"


class EventFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Event

    name = factory.Sequence(lambda n: f"Event {n}")
    stage = factory.LazyFunction(lambda: ev.Stage.objects.order_by("sequence").first())
    date_begin = factory.LazyFunction(lambda: timezone.now() + timedelta(days=10))
    date_end = factory.LazyAttribute(lambda o: o.date_begin + timedelta(hours=8))
    date_tz = "Europe/Brussels"
    is_published = True
    country = "BE"


class SlotFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Slot

    event = factory.SubFactory(EventFactory, is_multi_slots=True)
    date = factory.LazyAttribute(lambda o: o.event.date_begin.date())
    start_hour = 9.0
    end_hour = 12.0
    start_datetime = factory.LazyAttribute(lambda o: o.event.date_begin)
    end_datetime = factory.LazyAttribute(lambda o: o.event.date_begin + timedelta(hours=3))


class TicketFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Ticket

    event = factory.SubFactory(EventFactory)
    name = factory.Sequence(lambda n: f"Ticket {n}")
    price = Decimal("0")


class TypeTicketFactory(TicketFactory):
    event = None
    event_type = factory.SubFactory(EventTypeFactory)


class QuestionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Question

    event = factory.SubFactory(EventFactory)
    title = factory.Sequence(lambda n: f"Question {n}")
    question_type = ev.QuestionType.TEXT_BOX


class QuestionChoiceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.QuestionChoice

    question = factory.SubFactory(QuestionFactory, question_type=ev.QuestionType.SIMPLE_CHOICE)
    name = factory.Sequence(lambda n: f"Choice {n}")


class RegistrationFactory(factory.django.DjangoModelFactory):
    """A registration row. In `open`/`done` its seat is added to the ledger (no limit check)."""

    class Meta:
        model = ev.Registration
        skip_postgeneration_save = True

    event = factory.SubFactory(EventFactory)
    state = ev.RegistrationState.OPEN
    barcode = factory.Sequence(lambda n: f"{9_000_000_000 + n}")
    name = factory.Sequence(lambda n: f"Attendee {n}")
    email = factory.LazyAttribute(lambda o: f"{o.name.lower().replace(' ', '.')}@example.org")
    confirmed_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def book(obj, create, extracted, **kwargs):
        if not create or not obj.active or obj.state not in ("open", "done"):
            return
        from events.services import seats

        seats.apply(
            event=obj.event,
            holds=[
                seats.hold_for(
                    obj, reserved=int(obj.state == "open"), used=int(obj.state == "done")
                )
            ],
        )


class RegistrationAnswerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.RegistrationAnswer

    registration = factory.SubFactory(RegistrationFactory)
    question = factory.SubFactory(
        QuestionFactory, event=factory.SelfAttribute("..registration.event")
    )
    text_value = "an answer"


class SeatLedgerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.SeatLedger

    event = factory.SubFactory(EventFactory)


class MailFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.Mail

    event = factory.SubFactory(EventFactory)
    interval_nbr = 1
    interval_unit = ev.IntervalUnit.DAYS
    interval_type = ev.IntervalType.BEFORE_EVENT
    template_ref = "event-reminder"
    scheduled_date = factory.LazyAttribute(lambda o: o.event.date_begin - timedelta(days=1))


class TypeMailFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.TypeMail

    event_type = factory.SubFactory(EventTypeFactory)
    interval_nbr = 1
    interval_unit = ev.IntervalUnit.DAYS
    interval_type = ev.IntervalType.BEFORE_EVENT
    template_ref = "event-reminder"


class MailRegistrationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.MailRegistration

    scheduler = factory.SubFactory(MailFactory, interval_type=ev.IntervalType.AFTER_SUB)
    registration = factory.SubFactory(
        RegistrationFactory, event=factory.SelfAttribute("..scheduler.event")
    )
    scheduled_date = factory.LazyFunction(timezone.now)


class MailSlotFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.MailSlot

    scheduler = factory.SubFactory(MailFactory)
    slot = factory.SubFactory(SlotFactory, event=factory.SelfAttribute("..scheduler.event"))


class MessageTemplateFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.MessageTemplate
        django_get_or_create = ("ref",)

    ref = factory.Sequence(lambda n: f"template-{n}")
    name = factory.LazyAttribute(lambda o: o.ref)
    subject = "About {{ event.name }}"
    body = "<p>Hello {{ registration.name }}</p>"


def _logo_png() -> bytes:
    """A small PNG, as the logo verb stores one (re-encoded, at most 800 px)."""
    from io import BytesIO

    from PIL import Image

    out = BytesIO()
    Image.new("RGB", (200, 80), (20, 60, 200)).save(out, format="PNG")
    return out.getvalue()


class EventLogoFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.EventLogo

    event = factory.SubFactory(EventFactory)
    content = factory.LazyFunction(_logo_png)
    width = 200
    height = 80


class MailOutboxFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.MailOutbox

    idempotency_key = factory.Sequence(lambda n: f"key-{n}")
    message_id = factory.Sequence(lambda n: f"<msg-{n}@backbone-events>")
    recipient = "someone@example.org"
    subject = "Subject"
    body_text = "Body"
    next_attempt_at = factory.LazyFunction(timezone.now)


class EventAuditLogFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.EventAuditLog

    actor_type = ev.ActorType.SYSTEM
    actor_label = "tests"
    verb = "test.entry"


class IntakeIdempotencyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.IntakeIdempotency

    key = factory.Sequence(lambda n: f"idem-{n}")
    event = factory.SubFactory(EventFactory)
    fingerprint = "0" * 64
    status_code = 201
    response = factory.LazyFunction(dict)


class AttendeeExportFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ev.AttendeeExport

    requested_by = factory.SubFactory(UserFactory)
    event_ids = factory.LazyFunction(list)
    file_format = ev.ExportFormat.XLSX
    filename = factory.Sequence(lambda n: f"attendees-{n}.xlsx")


class WaitlistEntryFactory(factory.django.DjangoModelFactory):
    """A waiting entry (a row only: an `offered` one holds no seat unless the test books it;
    behaviour goes through events.services.waitlist)."""

    class Meta:
        model = ev.WaitlistEntry

    event = factory.SubFactory(EventFactory)
    name = factory.Sequence(lambda n: f"Waiting {n}")
    email = factory.Sequence(lambda n: f"waiting{n}@example.org")


class StaffSessionFactory(factory.django.DjangoModelFactory):
    """A signed-in session's row (sessions are made by signing in: `Client.force_login`)."""

    class Meta:
        model = ev.StaffSession

    session_key = factory.Sequence(lambda n: f"{n:032d}")
    session_data = ""
    expire_date = factory.LazyFunction(lambda: timezone.now() + timedelta(hours=1))
    user = factory.SubFactory(UserFactory)
