"""The one audit helper (spec.md §8): rows are written in the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import models, transaction

from events import hooks
from events.db import rows as sql_rows
from events.models import ActorType, Event, EventAuditLog, Registration


@dataclass(frozen=True)
class Actor:
    type: str
    id: str = ""
    label: str = ""


SYSTEM = Actor(ActorType.SYSTEM, label="system")
ACTOR_TYPES = frozenset(ActorType.values)  # `.values` is a new list on every access


def as_actor(actor: Any) -> Actor:
    """A user, an Actor, or a label: "system", "public", "seam", "desk" or "<type>:<label>"."""
    if isinstance(actor, Actor):
        return actor
    if isinstance(actor, AbstractBaseUser):
        return Actor(ActorType.USER, str(actor.pk), actor.get_username())
    if isinstance(actor, str) and actor:
        kind, _, label = actor.partition(":")
        if kind in ACTOR_TYPES:
            return Actor(kind, label=label or kind)
        return Actor(ActorType.SYSTEM, label=actor)
    raise TypeError(f"an actor is required (user or label), got {actor!r}")


def entry(
    *,
    actor: Any,
    verb: str,
    event: Event | int | None = None,
    registration: Registration | None = None,
    data: dict[str, Any] | None = None,
) -> EventAuditLog:
    a = as_actor(actor)
    event_id = event if isinstance(event, int) or event is None else event.pk
    if registration is not None and event_id is None:
        event_id = registration.event_id
    return EventAuditLog(
        actor_type=a.type,
        actor_id=a.id,
        actor_label=a.label[:255],
        event_id=event_id,
        registration_id=registration.pk if registration is not None else None,
        verb=verb,
        data=data or {},
    )


def record(**kwargs: Any) -> EventAuditLog:
    row = entry(**kwargs)
    row.save(force_insert=True)
    _tell_after_commit(frozenset((row.verb,)))
    return row


def _tell_after_commit(verbs: frozenset[str]) -> None:
    """Run the `audit_written` hooks with `verbs` once the transaction commits (nothing when no
    overlay registered one)."""
    if hooks.audit_written:
        transaction.on_commit(lambda: hooks.run(hooks.audit_written, verbs))


def record_many(rows: list[EventAuditLog], *, also: Sequence[models.Model] = ()) -> None:
    """One INSERT of every row, as a fixed statement per row count (rows.insert_statement on a
    server-binding cursor: psycopg prepares it, and the ORM does not compile it on every
    call). The rows keep pk None: nothing reads an audit row's id back. Not in pipeline mode
    (no verb writes its audit rows there this way: the booking's are inserted by
    `events_book`, the transitions' travel in their write statement, `rows.combined`).
    `also`: the caller's own rows (of one model: the desk's first answer to a nonce), inserted
    in the same statement, so a violation of their constraints writes no audit row either."""
    if not rows:
        return
    statements = [sql_rows.insert_statement(rows)]
    if also:
        statements.insert(0, sql_rows.insert_statement(list(also)))
    sql_rows.fetch(*sql_rows.combined(statements))
    _tell_after_commit(frozenset(row.verb for row in rows))
