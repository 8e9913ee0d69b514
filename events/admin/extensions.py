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


# --- the event dashboard's panels and the admin index's sections ----------------------------
#
# The dashboard (events.admin.dashboard) lives in core and shows core figures; an overlay adds
# its own panel by registering a callable in its AppConfig.ready():
#
#     register_dashboard_panel(DashboardPanel(name="booths", title="Booths", build=booth_panel))
#
# `build(event)` returns a `PanelData`: figures (label, value) shown as a table, an optional
# SVG chart (a string rendered server-side, no script) and alerts (text + admin link). It must
# run a constant number of queries whatever the number of registrations (tests hold the whole
# page to that). The admin index groups models by section (events.admin.index); an overlay
# names the section of its models and its internal tables the same way, so core never names
# an overlay's app.


@dataclass(frozen=True)
class Figure:
    label: str
    value: Any


@dataclass(frozen=True)
class Alert:
    text: str
    url: str = ""
    count: int = 0


@dataclass(frozen=True)
class PanelData:
    figures: Sequence[Figure] = ()
    svg: str = ""
    alerts: Sequence[Alert] = ()
    links: Sequence[Alert] = ()  # plain links (text + url) shown under the figures


@dataclass(frozen=True)
class DashboardPanel:
    name: str
    title: str
    build: Callable[[Any], PanelData]
    order: int = 100


_panels: dict[str, DashboardPanel] = {}


def register_dashboard_panel(panel: DashboardPanel) -> None:
    """Register (or replace, by name) a panel of the event dashboard."""
    _panels[panel.name] = panel


def unregister_dashboard_panel(name: str) -> None:
    _panels.pop(name, None)


def dashboard_panels() -> list[DashboardPanel]:
    return sorted(_panels.values(), key=lambda p: (p.order, p.name))


@dataclass(frozen=True)
class AdminSection:
    """Where an app's models show on the admin index: `models` maps a model name (lower case)
    to its section; `internal` names the tables only managers see listed."""

    app_label: str
    models: dict[str, str]
    internal: frozenset[str] = frozenset()


_sections: dict[str, AdminSection] = {}


def register_admin_section(section: AdminSection) -> None:
    _sections[section.app_label] = section


def admin_sections() -> dict[str, AdminSection]:
    return dict(_sections)
