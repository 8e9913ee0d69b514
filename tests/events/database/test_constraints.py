"""Every database constraint is enforced by PostgreSQL itself (spec.md §2, §3, §6; overlay §1-3).

Each violating write goes through `objects.create` / `bulk_create` / `.update()`, which skip
Django's model validation, so the refusal can only come from the database. Each test names the
constraint that must fire (psycopg's `diag.constraint_name`), so a different failure (a NOT NULL,
another check) does not pass for it.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta
from decimal import Decimal

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction
from django.db.models import F

from booths.models import BookingState, BoothBooking, BoothCategory
from events.models import (
    AttendeeExport,
    Event,
    IntakeIdempotency,
    MailRegistration,
    MailSlot,
    Question,
    QuestionChoice,
    Registration,
    RegistrationAnswer,
    SeatLedger,
    Slot,
    Stage,
    Tag,
    Ticket,
)
from leads.models import LeadProvenance, LeadProvenanceRegistration, LeadRequest
from seams.models import SeamInbox, SeamOrder, WebhookDelivery, WebhookEndpoint
from sms.models import SmsOutbox
from tests.booths import factories as booth_factories
from tests.desk import factories as desk_factories
from tests.events import factories
from tests.leads import factories as lead_factories
from tests.seams import factories as seam_factories
from tests.sms.factories import SmsOutboxFactory

pytestmark = pytest.mark.django_db


@contextmanager
def refused_by(*constraints: str):
    """The block's write is refused by PostgreSQL naming one of `constraints`.

    The write runs in its own savepoint so the test transaction stays usable afterwards.
    """
    with pytest.raises(IntegrityError) as info:
        with transaction.atomic():
            yield
    cause = info.value.__cause__
    assert cause is not None and cause.diag.constraint_name in constraints, (
        f"expected {constraints}, got {getattr(cause, 'diag', None) and cause.diag.constraint_name}"
        f": {info.value}"
    )


# --- events ---------------------------------------------------------------------------------


def test_event_end_must_follow_begin(now):
    stage = factories.stage()
    with refused_by("event_dates"):
        Event.objects.create(name="x", stage=stage, date_begin=now, date_end=now)
    event = factories.EventFactory(date_begin=now, date_end=now + timedelta(hours=1))
    with refused_by("event_dates"):
        Event.objects.filter(pk=event.pk).update(date_end=now - timedelta(hours=1))
    assert Event.objects.get(pk=event.pk).date_end == now + timedelta(hours=1)


def test_an_event_says_attach_or_link_for_its_pdf_ticket():
    event = factories.EventFactory()
    with refused_by("event_ticket_pdf_known"):
        Event.objects.filter(pk=event.pk).update(ticket_pdf="fax")
    assert Event.objects.filter(pk=event.pk).update(ticket_pdf="link") == 1


def test_the_cancel_deadline_is_at_most_a_year_of_hours():
    from events.models import CANCEL_DEADLINE_MAX, EventType

    event = factories.EventFactory(cancel_deadline_hours=CANCEL_DEADLINE_MAX)
    event_type = factories.EventTypeFactory(cancel_deadline_hours=CANCEL_DEADLINE_MAX)
    with refused_by("event_cancel_deadline_max"):
        Event.objects.filter(pk=event.pk).update(cancel_deadline_hours=CANCEL_DEADLINE_MAX + 1)
    with refused_by("event_type_cancel_deadline_max"):
        EventType.objects.filter(pk=event_type.pk).update(
            cancel_deadline_hours=CANCEL_DEADLINE_MAX + 1
        )
    assert Event.objects.get(pk=event.pk).cancel_deadline_hours == CANCEL_DEADLINE_MAX


def test_slot_hours_are_checked(now):
    event = factories.EventFactory(is_multi_slots=True, date_begin=now)
    common = {
        "event": event,
        "date": now.date(),
        "start_datetime": now,
        "end_datetime": now + timedelta(hours=1),
    }
    for start, end in ((10.0, 10.0), (11.0, 10.0), (-1.0, 2.0), (9.0, 24.0), (24.0, 25.0)):
        with refused_by("slot_hours"):
            Slot.objects.create(start_hour=start, end_hour=end, **common)
    slot = Slot.objects.create(start_hour=9.0, end_hour=10.0, **common)
    with refused_by("slot_datetimes"):
        Slot.objects.filter(pk=slot.pk).update(end_datetime=F("start_datetime"))
    assert Slot.objects.filter(event=event).count() == 1


def test_ticket_owner_is_exactly_one_of_event_and_type():
    event = factories.EventFactory()
    event_type = factories.EventTypeFactory()
    with refused_by("ticket_owner_exactly_one"):
        Ticket.objects.create(name="neither")
    with refused_by("ticket_owner_exactly_one"):
        Ticket.objects.create(name="both", event=event, event_type=event_type)
    Ticket.objects.create(name="of the event", event=event)
    Ticket.objects.create(name="of the type", event_type=event_type)
    assert Ticket.objects.count() == 2


def test_ticket_sale_dates(now):
    event = factories.EventFactory()
    with refused_by("ticket_sale_dates"):
        Ticket.objects.create(
            name="t",
            event=event,
            start_sale_datetime=now,
            end_sale_datetime=now - timedelta(seconds=1),
        )
    # equal bounds and open bounds are allowed
    Ticket.objects.create(name="t", event=event, start_sale_datetime=now, end_sale_datetime=now)
    Ticket.objects.create(name="t", event=event, end_sale_datetime=now)


def test_ticket_price_is_not_negative():
    ticket = factories.TicketFactory(price=Decimal("5.00"))
    with refused_by("ticket_price_positive"):
        Ticket.objects.filter(pk=ticket.pk).update(price=Decimal("-0.01"))
    assert Ticket.objects.get(pk=ticket.pk).price == Decimal("5.00")


def test_ticket_limit_per_order_at_most_30_and_seats_max():
    event = factories.EventFactory()
    with refused_by("ticket_limit_per_order"):
        Ticket.objects.create(name="t", event=event, limit_max_per_order=31)
    with refused_by("ticket_limit_per_order"):
        Ticket.objects.create(name="t", event=event, seats_max=5, limit_max_per_order=6)
    Ticket.objects.create(name="unlimited seats", event=event, seats_max=0, limit_max_per_order=30)
    Ticket.objects.create(name="at seats", event=event, seats_max=5, limit_max_per_order=5)
    assert Ticket.objects.filter(event=event).count() == 2


def test_question_owner_is_exactly_one_of_event_and_type():
    event = factories.EventFactory()
    event_type = factories.EventTypeFactory()
    with refused_by("question_owner_exactly_one"):
        Question.objects.create(title="neither")
    with refused_by("question_owner_exactly_one"):
        Question.objects.create(title="both", event=event, event_type=event_type)
    q = factories.QuestionFactory(event=event)
    with refused_by("question_owner_exactly_one"):
        Question.objects.filter(pk=q.pk).update(event=None)


def test_answer_holds_exactly_one_of_choice_and_text():
    choice = factories.QuestionChoiceFactory()
    reg = factories.RegistrationFactory(event=choice.question.event)
    with refused_by("answer_exactly_one"):
        RegistrationAnswer.objects.create(registration=reg, question=choice.question)
    with refused_by("answer_exactly_one"):
        RegistrationAnswer.objects.create(
            registration=reg, question=choice.question, choice=choice, text_value="M"
        )
    RegistrationAnswer.objects.create(registration=reg, question=choice.question, choice=choice)
    assert RegistrationAnswer.objects.filter(registration=reg).count() == 1


def test_answer_choice_must_belong_to_the_answered_question():
    """Composite FK answer_choice_of_question: DEFERRABLE INITIALLY DEFERRED, forced here."""
    shirt = factories.QuestionChoiceFactory(name="M")
    other = factories.QuestionFactory(
        event=shirt.question.event, question_type="simple_choice", title="Food"
    )
    reg = factories.RegistrationFactory(event=shirt.question.event)
    with refused_by("answer_choice_of_question"):
        RegistrationAnswer.objects.create(registration=reg, question=other, choice=shirt)
        connection.cursor().execute("SET CONSTRAINTS ALL IMMEDIATE")
    answer = RegistrationAnswer.objects.create(
        registration=reg, question=shirt.question, choice=shirt
    )
    with refused_by("answer_choice_of_question"):
        RegistrationAnswer.objects.filter(pk=answer.pk).update(question=other)
        connection.cursor().execute("SET CONSTRAINTS ALL IMMEDIATE")
    connection.cursor().execute("SET CONSTRAINTS ALL IMMEDIATE")  # the valid answer passes
    assert RegistrationAnswer.objects.get(pk=answer.pk).question_id == shirt.question_id


def test_choice_id_question_is_unique_target_of_the_composite_fk():
    """The composite FK needs (id, question_id) unique on choices; the constraint exists."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid), condeferrable, condeferred FROM pg_constraint"
            " WHERE conname = 'answer_choice_of_question'"
        )
        definition, deferrable, deferred = cursor.fetchone()
    assert definition == (
        "FOREIGN KEY (choice_id, question_id) REFERENCES events_questionchoice(id, question_id)"
        " DEFERRABLE INITIALLY DEFERRED"
    )
    assert (deferrable, deferred) == (True, True)
    # its target, unique (id, question) on choices, cannot be violated while id is the pk;
    # only its presence can be checked (also by the completeness test below)
    assert "choice_id_question" in {c.name for c in QuestionChoice._meta.constraints}


def test_barcode_is_unique():
    first = factories.RegistrationFactory(state="draft", barcode="12345678901234567890")
    with refused_by("events_registration_barcode_key"):
        Registration.objects.create(event=first.event, barcode="12345678901234567890")
    with refused_by("events_registration_barcode_key"):
        Registration.objects.bulk_create(
            [
                Registration(event=first.event, barcode="42"),
                Registration(event=first.event, barcode="42"),
            ]
        )
    assert Registration.objects.count() == 1


def test_tag_color_between_0_and_11():
    category = factories.TagCategoryFactory()
    with refused_by("tag_color_0_11"):
        Tag.objects.create(name="t", category=category, color=12)
    tag = Tag.objects.create(name="t", category=category, color=11)
    with refused_by("tag_color_0_11", "events_tag_color_check"):
        Tag.objects.filter(pk=tag.pk).update(color=-1)
    assert Tag.objects.get(pk=tag.pk).color == 11


def test_a_cancelled_stage_is_an_ending_stage():
    with refused_by("stage_cancelled_is_pipe_end"):
        Stage.objects.create(name="Scrapped", is_cancelled=True, pipe_end=False)
    stage = Stage.objects.create(name="Scrapped", is_cancelled=True, pipe_end=True)
    with refused_by("stage_cancelled_is_pipe_end"):
        Stage.objects.filter(pk=stage.pk).update(pipe_end=False)
    assert Stage.objects.get(pk=stage.pk).pipe_end


# --- seat ledger ----------------------------------------------------------------------------


def test_seat_ledger_counters_are_not_negative():
    event = factories.EventFactory()
    with refused_by("seat_ledger_positive"):
        SeatLedger.objects.create(event=event, reserved=-1)
    row = SeatLedger.objects.create(event=event, reserved=0, used=0)
    with refused_by("seat_ledger_positive"):
        SeatLedger.objects.filter(pk=row.pk).update(used=F("used") - 1)
    assert SeatLedger.objects.get(pk=row.pk).used == 0


def test_seat_ledger_key_is_unique_with_nulls_not_distinct():
    ticket = factories.TicketFactory()
    event = ticket.event
    SeatLedger.objects.create(event=event)  # the event-level "all" row
    SeatLedger.objects.create(event=event, ticket=ticket)  # a ticket row is another key
    with refused_by("seat_ledger_key"):
        SeatLedger.objects.create(event=event)  # NULL slot, NULL ticket again
    with refused_by("seat_ledger_key"):
        SeatLedger.objects.create(event=event, ticket=ticket)
    assert SeatLedger.objects.filter(event=event).count() == 2


# --- schedulers -----------------------------------------------------------------------------


def test_mail_registration_unique_per_scheduler_and_registration():
    row = factories.MailRegistrationFactory()
    with refused_by("mail_registration_unique"):
        MailRegistration.objects.create(scheduler=row.scheduler, registration=row.registration)
    with refused_by("mail_registration_unique"):
        MailRegistration.objects.bulk_create(
            [MailRegistration(scheduler=row.scheduler, registration=row.registration)]
        )
    assert MailRegistration.objects.count() == 1


def test_mail_slot_unique_per_scheduler_and_slot():
    row = factories.MailSlotFactory()
    with refused_by("mail_slot_unique"):
        MailSlot.objects.create(scheduler=row.scheduler, slot=row.slot)
    other = factories.SlotFactory(event=row.scheduler.event)
    MailSlot.objects.create(scheduler=row.scheduler, slot=other)
    assert MailSlot.objects.count() == 2


# --- overlays -------------------------------------------------------------------------------


def test_one_confirmed_booking_per_booth():
    booth = booth_factories.BoothFactory()
    # two pendings coexist (quotations), and a cancelled one beside a confirmed one is fine
    booth_factories.BoothBookingFactory(booth=booth, state=BookingState.PENDING)
    pending = booth_factories.BoothBookingFactory(booth=booth, state=BookingState.PENDING)
    booth_factories.BoothBookingFactory(booth=booth, state=BookingState.CANCELLED)
    booth_factories.BoothBookingFactory(booth=booth, state=BookingState.CONFIRMED)
    with refused_by("one_confirmed_booking_per_booth"):
        BoothBooking.objects.create(booth=booth, order_ref="SO-X", state=BookingState.CONFIRMED)
    with refused_by("one_confirmed_booking_per_booth"):
        BoothBooking.objects.filter(pk=pending.pk).update(state=BookingState.CONFIRMED)
    # another booth is not concerned
    booth_factories.BoothBookingFactory(state=BookingState.CONFIRMED)
    assert BoothBooking.objects.filter(state=BookingState.CONFIRMED).count() == 2


def test_desk_conflict_once_per_scan():
    conflict = desk_factories.OfflineConflictFactory()
    with refused_by("desk_conflict_once_per_scan"):
        desk_factories.OfflineConflictFactory(
            registration=conflict.registration,
            offline_actor_id=conflict.offline_actor_id,
            offline_scanned_at=conflict.offline_scanned_at,
        )
    # another scan of the same door (another time) is another conflict
    desk_factories.OfflineConflictFactory(
        registration=conflict.registration,
        offline_actor_id=conflict.offline_actor_id,
        offline_scanned_at=conflict.offline_scanned_at + timedelta(seconds=1),
    )


def test_booth_category_price_not_negative():
    with refused_by("booth_category_price"):
        BoothCategory.objects.create(name="c", price=Decimal("-1"))


def test_one_lead_request_per_event():
    request = lead_factories.LeadRequestFactory()
    with refused_by("leads_leadrequest_event_id_key"):
        LeadRequest.objects.create(event=request.event)
    assert LeadRequest.objects.count() == 1


def test_lead_provenance_registration_unique_per_rule_and_registration():
    row = lead_factories.LeadProvenanceRegistrationFactory()
    second = lead_factories.LeadProvenanceFactory(rule=row.rule, event=row.provenance.event)
    with refused_by("lead_rule_registration"):
        LeadProvenanceRegistration.objects.create(
            provenance=second, registration=row.registration, rule=row.rule
        )
    other_rule = lead_factories.LeadRuleFactory()
    LeadProvenanceRegistration.objects.create(
        provenance=second, registration=row.registration, rule=other_rule
    )
    assert LeadProvenanceRegistration.objects.count() == 2


def test_lead_provenance_group_unique_per_rule_event_group():
    prov = lead_factories.LeadProvenanceFactory(group_key="SO1")
    with refused_by("lead_provenance_group"):
        LeadProvenance.objects.create(
            rule=prov.rule, event=prov.event, lead_ref="other", group_key="SO1", basis="order"
        )


def test_seam_inbox_unique_per_source_and_message_id():
    seam_factories.SeamInboxFactory(source="sale", message_id="msg_1")
    with refused_by("seam_inbox_message"):
        SeamInbox.objects.create(
            source="sale", message_id="msg_1", type="order.paid", body={}, status="applied"
        )
    SeamInbox.objects.create(
        source="other", message_id="msg_1", type="order.paid", body={}, status="applied"
    )
    assert SeamInbox.objects.filter(message_id="msg_1").count() == 2


def test_seam_order_unique_per_order_ref():
    seam_factories.SeamOrderFactory(order_ref="SO1")
    with refused_by("seams_seamorder_order_ref_key"):
        SeamOrder.objects.create(order_ref="SO1", version=2, state="paid")


def test_intake_idempotency_key_unique_per_event():
    event = factories.EventFactory()
    IntakeIdempotency.objects.create(
        key="k", event=event, fingerprint="f", status_code=201, response={}
    )
    with refused_by("intake_idempotency_key"):
        IntakeIdempotency.objects.create(
            key="k", event=event, fingerprint="g", status_code=201, response={}
        )


def test_sms_outbox_state_is_known_and_a_sent_row_has_sent_at():
    row = SmsOutboxFactory()
    with refused_by("sms_outbox_state_valid"):
        SmsOutbox.objects.filter(pk=row.pk).update(state="lost")
    with refused_by("sms_outbox_sent_has_sent_at"):
        SmsOutbox.objects.filter(pk=row.pk).update(state="sent")
    with refused_by("sms_smsoutbox_reference_key"):
        SmsOutboxFactory(reference=row.reference)
    assert SmsOutbox.objects.filter(pk=row.pk).update(state="failed") == 1  # no sent_at needed


def test_an_attendee_export_has_a_known_format_and_state_and_a_ready_one_its_file():
    row = factories.AttendeeExportFactory()
    with refused_by("export_format_known"):
        AttendeeExport.objects.filter(pk=row.pk).update(file_format="odt")
    assert AttendeeExport.objects.filter(pk=row.pk).update(file_format="pdf") == 1
    with refused_by("export_state_known"):
        AttendeeExport.objects.filter(pk=row.pk).update(state="lost")
    with refused_by("export_done_has_content"):
        AttendeeExport.objects.filter(pk=row.pk).update(state="done")
    assert AttendeeExport.objects.filter(pk=row.pk).update(state="done", content=b"x") == 1


def test_one_live_waiting_list_entry_per_person_and_an_offer_has_its_window():
    from events.models import WaitlistEntry

    ticketless = factories.WaitlistEntryFactory(email="ada@example.org")
    event = ticketless.event
    with refused_by("waitlist_one_live_entry"):  # NULL ticket and slot compare equal
        WaitlistEntry.objects.create(event=event, name="Ada again", email="ada@example.org")
    WaitlistEntry.objects.filter(pk=ticketless.pk).update(state="expired")
    again = WaitlistEntry.objects.create(event=event, name="Ada again", email="ada@example.org")
    with refused_by("waitlist_offer_has_window"):
        WaitlistEntry.objects.filter(pk=again.pk).update(state="offered")
    now = ticketless.created_at
    assert (
        WaitlistEntry.objects.filter(pk=again.pk).update(
            state="offered", offered_at=now, expires_at=now
        )
        == 1
    )


def test_webhook_rows_hold_their_invariants():
    delivery = seam_factories.WebhookDeliveryFactory()
    with refused_by("webhook_endpoint_known_types"):
        WebhookEndpoint.objects.filter(pk=delivery.endpoint_id).update(
            event_types=["registration.created", "order.lost"]
        )
    with refused_by("webhook_subject_version"):
        seam_factories.WebhookMessageFactory(subject=delivery.subject, version=delivery.version)
    with refused_by("webhook_delivery_once"):
        seam_factories.WebhookDeliveryFactory(message=delivery.message, endpoint=delivery.endpoint)
    with refused_by("webhook_delivery_state_valid"):
        WebhookDelivery.objects.filter(pk=delivery.pk).update(state="lost")
    with refused_by("webhook_delivered_has_time"):
        WebhookDelivery.objects.filter(pk=delivery.pk).update(state="delivered")
    assert WebhookDelivery.objects.filter(pk=delivery.pk).update(state="failed") == 1


# --- completeness ---------------------------------------------------------------------------

TESTED = {
    "event_dates",
    "event_cancel_deadline_max",
    "event_type_cancel_deadline_max",
    "event_ticket_pdf_known",
    "slot_hours",
    "slot_datetimes",
    "ticket_owner_exactly_one",
    "ticket_sale_dates",
    "ticket_price_positive",
    "ticket_limit_per_order",
    "question_owner_exactly_one",
    "choice_id_question",
    "answer_exactly_one",
    "tag_color_0_11",
    "stage_cancelled_is_pipe_end",
    "events_registration_barcode_key",  # test_barcode_is_unique
    "seat_ledger_key",
    "seat_ledger_positive",
    "mail_registration_unique",
    "mail_slot_unique",
    "intake_idempotency_key",
    "desk_scan_nonce",
    "booth_category_price",
    "one_confirmed_booking_per_booth",
    "lead_provenance_group",
    "lead_rule_registration",
    "seam_inbox_message",
    "sms_outbox_state_valid",
    "sms_outbox_sent_has_sent_at",
    "export_format_known",
    "export_state_known",
    "export_done_has_content",
    "waitlist_one_live_entry",
    "waitlist_offer_has_window",
    "webhook_endpoint_known_types",
    "webhook_subject_version",
    "webhook_delivery_once",
    "webhook_delivery_state_valid",
    "webhook_delivered_has_time",
    "desk_conflict_once_per_scan",
}


def test_desk_scan_nonce_unique_per_user():
    first = desk_factories.ScanNonceFactory(nonce="n")
    desk_factories.ScanNonceFactory(nonce="n")  # another user: fine
    with refused_by("desk_scan_nonce"):
        desk_factories.ScanNonceFactory(nonce="n", user=first.user)


def test_every_declared_constraint_has_a_test_here_and_exists_in_postgresql():
    declared = {
        c.name
        for label in ("events", "booths", "leads", "seams", "sms", "desk")
        for model in apps.get_app_config(label).get_models()
        for c in model._meta.constraints
    }
    assert declared == TESTED
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE conname = ANY(%s)"
            " UNION SELECT indexname FROM pg_indexes WHERE indexname = ANY(%s)",
            [list(declared), list(declared)],
        )
        present = {row[0] for row in cursor.fetchall()}
    assert present == declared


def test_registration_lookups_by_ref_ticket_and_slot_use_their_partial_indexes():
    """The partial indexes (migration 0011) serve what reads them: a lookup by a given order
    ref, partner ref, ticket or slot. Plans read with enable_seqscan off, so the check is
    whether the index can serve the lookup at all, not whether this small table prefers it."""
    reg = factories.RegistrationFactory(state="draft")
    lookups = {
        "registration_sale_order_ref": Registration.objects.filter(sale_order_ref="SO-1"),
        "registration_partner_ref": Registration.objects.filter(partner_ref="P-1"),
        "registration_ticket": Registration.objects.filter(ticket_id=reg.pk),
        "registration_slot": Registration.objects.filter(slot_id=reg.pk),
    }
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
    for index, queryset in lookups.items():
        assert index in queryset.explain(), index
