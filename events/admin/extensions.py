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


_extensions: dict[str, EventAdminExtension] = {}


def register_event_extension(extension: EventAdminExtension) -> None:
    """Register (or replace, by name) an overlay's additions to the Event admin."""
    _extensions[extension.name] = extension


def event_extensions() -> list[EventAdminExtension]:
    return list(_extensions.values())
