"""The admin index organised by what staff do, not by Python app.

Sections, in this order: Events, Attendees, Communication, Booths, Leads, Host integration,
then anything else (users and groups). Each app says where its models go through
`extensions.register_admin_section` (core here; an overlay in its AppConfig.ready(), so core
never names an overlay); a model no section names stays under its app's own name.

Internal tables (seat ledgers, intake idempotency keys, per-attendee scheduler rows, answers
as a table, linked products, the audit log…) are listed only for managers — superusers and
members of the "Event manager" group. This hides them from the index and the app pages; it
changes no permission (a registration's answers still show on its page).

The default `admin.site` keeps its class: `get_app_list` is replaced on that one instance
(see `install`), so every ModelAdmin registered with `@admin.register` stays where it is.
"""

from __future__ import annotations

import types

from django.contrib import admin

from events.admin.extensions import AdminSection, admin_sections, register_admin_section

SECTIONS = ("Events", "Attendees", "Communication", "Booths", "Leads", "Host integration")
MANAGER_GROUP = "Event manager"
CORE_APP = "events"

register_admin_section(
    AdminSection(
        app_label="events",
        models={
            "event": "Events",
            "ticket": "Events",
            "slot": "Events",
            "question": "Events",
            "questionchoice": "Events",
            "eventtype": "Events",
            "stage": "Events",
            "tag": "Events",
            "tagcategory": "Events",
            "registration": "Attendees",
            "registrationanswer": "Attendees",
            "seatledger": "Attendees",
            "waitlistentry": "Attendees",
            "intakeidempotency": "Host integration",
            "linkedproduct": "Host integration",
            "mail": "Communication",
            "typemail": "Communication",
            "messagetemplate": "Communication",
            "mailoutbox": "Communication",
            "mailregistration": "Communication",
            "mailslot": "Communication",
            "eventauditlog": "Events",
        },
        internal=frozenset(
            {
                "seatledger",
                "intakeidempotency",
                "mailregistration",
                "mailslot",
                "linkedproduct",
                "registrationanswer",
                "eventauditlog",
            }
        ),
    )
)


def is_manager(user) -> bool:
    if not user.is_active:
        return False
    if user.is_superuser:
        return True
    cached = getattr(user, "_events_is_manager", None)
    if cached is None:
        cached = user._events_is_manager = user.groups.filter(name=MANAGER_GROUP).exists()
    return cached


def grouped(app_list: list[dict], *, manager: bool) -> list[dict]:
    """Regroup Django's app list ({name, app_label, models: [{object_name, …}]}) by section."""
    sections = admin_sections()
    buckets: dict[str, dict] = {}
    order: list[str] = []
    # id(model dict) → (core first, app, rank in its app's section list, name): a section
    # mixing apps lists core's models first, then each overlay's, each in its declared order.
    position: dict[int, tuple[int, str, int, str]] = {}
    for app in app_list:
        label = app["app_label"]
        section = sections.get(label)
        ranks = {n: i for i, n in enumerate(section.models)} if section else {}
        for model in app["models"]:
            name = model["object_name"].lower()
            if section is not None and name in section.internal and not manager:
                continue
            core = 0 if label == CORE_APP else 1
            position[id(model)] = (core, label, ranks.get(name, len(ranks)), str(model["name"]))
            title = (section.models.get(name) if section else None) or app["name"]
            if title not in buckets:
                buckets[title] = {**app, "name": title, "models": []}
                order.append(title)
            buckets[title]["models"].append(model)
    rank = {name: i for i, name in enumerate(SECTIONS)}
    order.sort(key=lambda t: (rank.get(t, len(SECTIONS)), t))
    result = []
    for title in order:
        bucket = buckets[title]
        bucket["models"].sort(key=lambda m: position[id(m)])  # as the section lists them
        result.append(bucket)
    return result


def _get_app_list(self, request, app_label=None):
    app_list = admin.AdminSite.get_app_list(self, request, app_label)
    return grouped(app_list, manager=is_manager(request.user))


def install(site: admin.AdminSite = admin.site) -> None:
    site.get_app_list = types.MethodType(_get_app_list, site)


install()
