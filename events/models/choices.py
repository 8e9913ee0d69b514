"""The closed vocabularies of the core: states, sources, types (Django `TextChoices`)."""

from __future__ import annotations

from django.db import models


class KanbanState(models.TextChoices):
    NORMAL = "normal", "In progress"
    DONE = "done", "Ready for next stage"
    BLOCKED = "blocked", "Blocked"
    CANCEL = "cancel", "Cancelled"


class RegistrationState(models.TextChoices):
    DRAFT = "draft", "Unconfirmed"
    OPEN = "open", "Registered"
    DONE = "done", "Attended"
    CANCEL = "cancel", "Cancelled"


class ContactSource(models.TextChoices):
    ATTENDEE = "attendee", "Typed for the attendee"
    PARTNER = "partner", "From the partner"


class CancelSource(models.TextChoices):
    """Who cancelled a registration: the seam's mint count (spec-overlay.md §1.4) keeps staff
    cancellations as existing and replaces order cancellations."""

    STAFF = "staff", "Staff"
    ORDER = "order", "Order cancellation"


class SaleStatus(models.TextChoices):
    FREE = "free", "Free"
    SOLD = "sold", "Sold"
    TO_PAY = "to_pay", "Not sold"


class QuestionType(models.TextChoices):
    SIMPLE_CHOICE = "simple_choice", "Selection"
    TEXT_BOX = "text_box", "Text input"
    NAME = "name", "Name"
    EMAIL = "email", "Email"
    PHONE = "phone", "Phone"
    COMPANY_NAME = "company_name", "Company"


class IntervalUnit(models.TextChoices):
    NOW = "now", "Immediately"
    HOURS = "hours", "Hours"
    DAYS = "days", "Days"
    WEEKS = "weeks", "Weeks"
    MONTHS = "months", "Months"


class IntervalType(models.TextChoices):
    AFTER_SUB = "after_sub", "After each registration"
    BEFORE_EVENT = "before_event", "Before the event"
    AFTER_EVENT_START = "after_event_start", "After the event started"
    AFTER_EVENT = "after_event", "After the event"
    BEFORE_EVENT_END = "before_event_end", "Before the event ends"


class NotificationType(models.TextChoices):
    MAIL = "mail", "Mail"
    SMS = "sms", "SMS"


class MailOutcome(models.TextChoices):
    SENT = "sent", "Sent"
    SKIPPED_NO_PHONE = "skipped_no_phone", "Skipped: no phone"
    SKIPPED_NO_EMAIL = "skipped_no_email", "Skipped: no email"


class ActorType(models.TextChoices):
    USER = "user", "Staff user"
    SYSTEM = "system", "System"
    SEAM = "seam", "Host seam"
    PUBLIC = "public", "Public"
    DESK = "desk", "Desk"
    ATTENDEE = "attendee", "Attendee"
