"""The Event admin's extension point: overlays add inlines, columns and actions to it.

Core never imports an overlay (spec.md §1). An overlay registers an `EventAdminExtension` in its
`AppConfig.ready()`; the Event admin reads the registry on every request, so the order of app
loading does not matter:

    from events.admin.extensions import EventAdminExtension, register_event_extension

    register_event_extension(
        EventAdminExtension(
            name="booths",
            inlines=(BoothInline,),
            list_display=(booth_counts,),  # a callable taking the event, with @admin.display
            actions=(confirm_booths,),      # admin actions: (modeladmin, request, queryset)
        )
    )

Read-only fields show on the Event change page in an "Overlays" section. A column that needs
data per event gets it for the whole changelist page at once from `prefetch(events)`, called
with the page's rows before they render (keep the values on the rows, as the seat columns do),
so the changelist's query count does not grow with the number of events.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EventAdminExtension:
    name: str
    inlines: Sequence[type] = ()
    list_display: Sequence[Callable[[Any], Any]] = ()
    readonly_fields: Sequence[Callable[[Any], Any]] = ()
    actions: Sequence[Callable[..., Any]] = ()
    prefetch: Callable[[list[Any]], None] | None = None


_extensions: dict[str, EventAdminExtension] = {}


def register_event_extension(extension: EventAdminExtension) -> None:
    """Register (or replace, by name) an overlay's additions to the Event admin."""
    _extensions[extension.name] = extension


def unregister_event_extension(name: str) -> None:
    """Remove an overlay's additions (tests; an overlay never needs it at run time)."""
    _extensions.pop(name, None)


def event_extensions() -> list[EventAdminExtension]:
    return list(_extensions.values())
