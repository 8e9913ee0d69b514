"""Explicit hook lists through which overlays act on core events (spec.md §1).

Core never imports an overlay. An overlay appends its callable in its `AppConfig.ready()`;
core calls each hook inside the same transaction as the change (`registrations_changed`:
after it committed). Never Django signals.

- `event_created_from_type(event, event_type, actor)`: after template-apply on create_event
  (the booths overlay adds one Booth per TypeBooth).
- `registrations_changed(registrations, actor, signals)`: once registrations were created or
  changed state and that committed (the booking and every transition register it with
  `transaction.on_commit`): after-commit work such as nudging a pass. Writes that must commit
  with the change belong to the overlay's own database trigger on the registration table,
  which runs in the same transaction whoever writes (the leads overlay's, leads migration
  0005, upserts the event's lead request). A trigger that wrote something needing
  after-commit work appends its name to the transaction-local setting
  `events.after_commit` (comma-separated); the verb takes it at the end of its writes (reads
  and empties it) and hands the names as `signals` (a frozenset), so a hook acts only when
  its trigger asked (the leads hook nudges its pass when `"leads"` is in them). Until an
  overlay is installed the list is empty and nothing happens.
- `audit_written(verbs)`: once a transaction that wrote audit rows through `audit.record` or
  `audit.record_many` committed, with the verbs of those rows (a frozenset): after-commit work
  of an overlay whose trigger on the audit log wrote something in that transaction (the seams
  overlay nudges its webhook delivery when a verb it turns into a message is among them). The
  booking and the transitions write their audit rows themselves and report through
  `registrations_changed`'s `signals`.
- `reference_data()`: re-create the overlay's group permissions after a test flush
  (`events.reference_data.ensure`); the overlay's own data migration grants them first.
- `seed_demo_type(event_type)`: `manage.py seed_demo` lets each overlay add its template lines
  to the demo event type (the booths overlay adds booth lines).
- `seed_demo(stdout)`: after `manage.py seed_demo` loaded the core demo, each overlay adds its
  own demo rows (the seams overlay leaves one applied and one parked inbox message).
- `periodic_tasks`: Celery beat entries of overlays, each a mapping `{"name", "task",
  "schedule"}` (schedule in seconds or a celery schedule). `config/celery.py` merges them into
  `beat_schedule` once Django is set up, so core config never names an overlay task (the leads
  overlay adds its lead pass, every minute).
- `sale_order_lines[kind](effect=, order=, lines=, actor=, later=)`: a host order line kind
  other than `ticket` is handled by the overlay that registers it (booths: `booth`), inside the
  seam's transaction; `effect` is "confirm", "paid" or "cancel"; `lines` are that kind's lines
  of the order (possibly none); `later` is true when a version of the order was applied before,
  so the lines are its whole truth and what they no longer name is to be released. The handler
  returns a mapping that joins the seam's answer (empty when nothing changed). A line of an
  unregistered kind is refused by the seam as `unknown_reference`.
- `catalogs[name](event=)`: a catalog read an overlay adds beside the linked products
  (`GET /api/v1/catalog/<name>?event=<id>`, booths: `booths`), called with a published, active
  event; it returns the JSON-ready rows in a fixed number of queries. A name with no reader
  answers `not_found`.
- `template_previews(template, rendered)`: extra lines under the message template admin's
  preview, each hook returning text or "" (the sms overlay: length, GSM-7 / UCS-2, segments).
  `rendered` is the template rendered for the latest attendee, or None when it cannot be.
- `startup_checks()`: raise `ImproperlyConfigured` when the overlay's configuration cannot work;
  `config/wsgi.py` runs them so the web server refuses to start (the sms overlay: the HTTP
  gateway adapter without EVENT_SMS_GATEWAY_URL). The overlay also registers the same rule as a
  Django system check, which every `manage.py` command runs.
"""

from collections.abc import Callable
from typing import Any

event_created_from_type: list[Callable[..., Any]] = []
registrations_changed: list[Callable[..., Any]] = []
audit_written: list[Callable[..., Any]] = []
reference_data: list[Callable[..., Any]] = []
seed_demo_type: list[Callable[..., Any]] = []
seed_demo: list[Callable[..., Any]] = []
periodic_tasks: list[dict[str, Any]] = []
sale_order_lines: dict[str, Callable[..., Any]] = {}
catalogs: dict[str, Callable[..., Any]] = {}
template_previews: list[Callable[..., str]] = []
startup_checks: list[Callable[[], None]] = []


def run(hooks: list[Callable[..., Any]], *args: Any, **kwargs: Any) -> None:
    for hook in hooks:
        hook(*args, **kwargs)
