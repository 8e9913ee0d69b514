"""Reference data created by migration 0002: the stages (spec.md §2.2) and the permission
groups (spec.md §9). Functions take an app registry so the migration can pass its own;
tests call `ensure()` after a transactional test truncated the tables.
"""

from django.apps import apps as global_apps
from django.contrib.auth.management import create_permissions
from django.contrib.contenttypes.management import create_contenttypes

STAGES = [
    # name, sequence, fold, pipe_end
    ("New", 1, False, False),
    ("Booked", 2, False, False),
    ("Announced", 3, False, False),
    ("Ended", 5, True, True),
    ("Cancelled", 6, True, True),
]

CORE_MANAGED = [
    "event",
    "ticket",
    "slot",
    "question",
    "questionchoice",
    "mail",
    "registration",
    "registrationanswer",
]
CORE_READ = [
    "eventtype",
    "stage",
    "tag",
    "tagcategory",
    "typemail",
    "mailregistration",
    "mailslot",
    "eventauditlog",
    "messagetemplate",
    "mailoutbox",
    "linkedproduct",
]
# The manager's "everything": every app of the product (sms and desk have no models yet; an app
# that adds models later needs a data migration calling create_groups again).
GROUP_APPS = ["events", "sms", "booths", "leads", "desk", "seams"]


def create_stages(apps=global_apps) -> None:
    Stage = apps.get_model("events", "Stage")
    for name, sequence, fold, pipe_end in STAGES:
        Stage.objects.get_or_create(
            name=name, defaults={"sequence": sequence, "fold": fold, "pipe_end": pipe_end}
        )


def create_groups(apps=global_apps) -> None:
    # Permissions are normally created after migrate; make sure they exist now.
    for app_config in apps.get_app_configs():
        if apps is not global_apps:
            app_config.models_module = True
        create_contenttypes(app_config, apps=apps, verbosity=0)
        create_permissions(app_config, apps=apps, verbosity=0)
        if apps is not global_apps:
            app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")

    def perms(app_label, models, actions):
        codenames = [f"{a}_{m}" for m in models for a in actions]
        found = list(
            Permission.objects.filter(content_type__app_label=app_label, codename__in=codenames)
        )
        missing = set(codenames) - {p.codename for p in found}
        if missing:
            raise RuntimeError(f"permissions missing for {app_label}: {sorted(missing)}")
        return found

    checkin = list(
        Permission.objects.filter(content_type__app_label="events", codename="checkin_registration")
    )
    desk = perms("events", ["event", "registration", "ticket", "slot"], ["view"]) + checkin
    user = (
        perms("events", CORE_MANAGED, ("add", "change", "view"))
        + perms("events", CORE_READ, ("view",))
        + perms("booths", ["booth", "boothbooking"], ("add", "change", "view"))
        + perms("booths", ["boothcategory", "typebooth"], ("view",))
        + perms("leads", ["lead", "leadrule", "leadprovenance"], ("view",))
        + checkin
    )
    manager = list(
        Permission.objects.filter(content_type__app_label__in=GROUP_APPS).exclude(
            codename__in=["change_eventauditlog", "delete_eventauditlog"]
        )
    )
    for name, permissions in (
        ("Event desk", desk),
        ("Event user", user),
        ("Event manager", manager),
    ):
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.set(permissions)


def ensure() -> None:
    """Re-create what a truncating test flush removed (idempotent)."""
    from django.contrib.auth.models import Group
    from django.contrib.contenttypes.models import ContentType

    from events.models import Stage

    if not Stage.objects.exists():
        create_stages()
    if Group.objects.filter(name__startswith="Event ").count() < 3:
        ContentType.objects.clear_cache()
        create_groups()
