"""Registrations: creation and the state machine of spec.md §4 — the one writer of
`Registration.state`.

- `rules`: the states, transitions and audit verbs, the ticket/slot pair, answers, contacts;
- `booking`: `register` (the seats, the rows, the audit: one `events_book` call) and
  `read_inputs`, what a booking decides on, for a caller that checks or books on them;
- `transitions`: confirm, mark attended, undo attendance, cancel, reset to draft, archive;
- `partner_sync`: the partner's contact details onto its registrations.

Callers use this package's names (`registrations.register`, `registrations.cancel`, …).
"""

from events.services.registrations.booking import (  # noqa: F401
    BARCODE_ATTEMPTS,
    BookingInputs,
    is_barcode_collision,
    new_barcode,
    read_inputs,
    register,
)
from events.services.registrations.partner_sync import (  # noqa: F401
    sync_from_partner,
)
from events.services.registrations.rules import (  # noqa: F401
    AUDIT_VERBS,
    CANCEL_SOURCES,
    CONTACT_QUESTION_FIELDS,
    SALE_STATUSES,
    TRANSITIONS,
    UNKNOWN,
    S,
    check_pair,
    clean_answers,
)
from events.services.registrations.transitions import (  # noqa: F401
    Seen,
    archive,
    cancel,
    confirm,
    mark_attended,
    reset_to_draft,
    row_version,
    unarchive,
    undo_attendance,
)
