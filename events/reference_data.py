"""Reference data created by migration 0002 (the cancelled stage flagged and the export
permission granted by 0015): the stages (spec.md §2.2) and the permission
groups (spec.md §9). Functions take an app registry so the migration can pass its own;
tests call `ensure()` after a transactional test emptied the tables.
"""

from collections.abc import Sequence

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
# The stage created with `is_cancelled` set. Only this creation reads the name: what closes an
# event is the flag (staff may rename the stage, or flag another ending stage).
CANCELLED_STAGE = "Cancelled"

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
GROUPS = ("Event desk", "Event user", "Event manager")
# Granted to the user group beside its model permissions (the manager holds every permission).
EXPORT_GRANTED = ["export_registrations"]
# The audit log is append-only: nobody is granted rewriting it.
NEVER = ("change_eventauditlog", "delete_eventauditlog")

Grant = tuple[list[str], tuple[str, ...]]  # (model names, actions)


def create_stages(apps=global_apps) -> None:
    Stage = apps.get_model("events", "Stage")
    flagged = any(f.name == "is_cancelled" for f in Stage._meta.get_fields())
    for name, sequence, fold, pipe_end in STAGES:
        defaults = {"sequence": sequence, "fold": fold, "pipe_end": pipe_end}
        if flagged:  # migration 0002 runs on the Stage of its time, before the flag (0015)
            defaults["is_cancelled"] = name == CANCELLED_STAGE
        Stage.objects.get_or_create(name=name, defaults=defaults)


def grant(
    apps,
    *,
    app_label: str,
    desk: list[Grant] = (),
    user: list[Grant] = (),
    extra: list[str] = (),
    user_extra: list[str] = (),
) -> None:
    """Give the three groups their permissions on one app's models (spec.md §9).

    The desk and user groups get the listed (models, actions) plus the `extra` codenames (when
    they get anything of this app), the user group also the `user_extra` codenames; the
    manager gets every permission of the app (but rewriting the audit log). Each app calls this
    for itself — core from its migration 0002, an overlay from its own data migration — so core
    never names an overlay's models. Adds to the groups; never removes.
    """
    app_config = apps.get_app_config(app_label)
    # Permissions are normally created after migrate; make sure this app's exist now.
    if apps is not global_apps:
        app_config.models_module = True
    create_contenttypes(app_config, apps=apps, verbosity=0)
    create_permissions(app_config, apps=apps, verbosity=0)
    if apps is not global_apps:
        app_config.models_module = None

    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    of_app = Permission.objects.filter(content_type__app_label=app_label)

    def perms(grants: list[Grant], more: Sequence[str] = ()) -> list:
        codenames = [f"{a}_{m}" for models, actions in grants for m in models for a in actions]
        codenames += [*extra, *more]
        found = list(of_app.filter(codename__in=codenames))
        missing = set(codenames) - {p.codename for p in found}
        if missing:
            raise RuntimeError(f"permissions missing for {app_label}: {sorted(missing)}")
        return found

    for name, permissions in (
        ("Event desk", perms(desk) if desk else []),
        ("Event user", perms(user, user_extra) if user else []),
        ("Event manager", list(of_app.exclude(codename__in=NEVER))),
    ):
        group, _ = Group.objects.get_or_create(name=name)
        group.permissions.add(*permissions)


def create_groups(apps=global_apps) -> None:
    """The core's share of the groups; each overlay grants its own models (its migration)."""
    # Migrations before 0015 run on a Registration that does not declare the export permission.
    declared = {
        codename for codename, _ in apps.get_model("events", "Registration")._meta.permissions
    }
    grant(
        apps,
        app_label="events",
        desk=[(["event", "registration", "ticket", "slot"], ("view",))],
        user=[(CORE_MANAGED, ("add", "change", "view")), (CORE_READ, ("view",))],
        extra=["checkin_registration"],  # desk and user both check attendees in
        # Every attendee's contact details in one file: for those who run events, never the
        # door (least privilege). The manager holds it as every permission of the app.
        user_extra=[codename for codename in EXPORT_GRANTED if codename in declared],
    )


def ensure() -> None:
    """Re-create what the end of a transactional test removed (idempotent): the stages, the core's
    groups, and every overlay's grants (`hooks.reference_data`)."""
    from django.contrib.auth.models import Group
    from django.contrib.contenttypes.models import ContentType

    from events import hooks
    from events.models import Stage

    if not Stage.objects.exists():
        create_stages()
    if Group.objects.filter(name__in=GROUPS, permissions__isnull=False).distinct().count() < 3:
        ContentType.objects.clear_cache()
        create_groups()
        hooks.run(hooks.reference_data)
