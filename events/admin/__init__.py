"""Staff surface (spec.md §9): a thin admin; every change of state calls a service.

`base` holds the building blocks overlays import; `extensions` is the Event admin's extension
point; the ModelAdmins are registered by the modules imported below, one per concern.
"""

from events.admin import (  # noqa: F401 — each module registers its ModelAdmins
    communication,
    events,
    index,
    reference,
    registrations,
    templates,
    waitlist,
)
