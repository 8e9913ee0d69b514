"""Core schema (spec.md §2, §3, §6, §8), one module per section; every model is importable from
`events.models`, which is where Django finds them.

Models hold data and the invariants PostgreSQL can enforce; every write goes through
`events.services`. Datetimes are aware UTC; host objects are opaque `*_ref` strings.
"""

from events.models.audit import (  # noqa: F401
    AttendeeExport,
    EventAuditLog,
    ExportFormat,
    ExportState,
    LinkedProduct,
)
from events.models.choices import (  # noqa: F401
    ActorType,
    CancelSource,
    ContactSource,
    IntervalType,
    IntervalUnit,
    KanbanState,
    MailOutcome,
    NotificationType,
    QuestionType,
    RegistrationState,
    SaleStatus,
)
from events.models.communication import (  # noqa: F401
    IntakeIdempotency,
    Mail,
    MailOutbox,
    MailRegistration,
    MailSlot,
    MessageTemplate,
    OutboxState,
    TypeMail,
)
from events.models.events import (  # noqa: F401
    Event,
    EventLogo,
    Question,
    QuestionChoice,
    Slot,
    Ticket,
    TicketPdf,
)
from events.models.reference import (  # noqa: F401
    CANCEL_DEADLINE_HELP,
    CANCEL_DEADLINE_MAX,
    EventType,
    Stage,
    Tag,
    TagCategory,
    cancel_deadline_bounded,
)
from events.models.registrations import (  # noqa: F401
    Registration,
    RegistrationAnswer,
    SeatLedger,
    WaitlistEntry,
    WaitlistState,
)
from events.models.sessions import StaffSession  # noqa: F401
