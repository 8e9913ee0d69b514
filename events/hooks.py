"""Explicit hook lists through which overlays act on core events (spec.md §1).

Core never imports an overlay. An overlay appends its callable in its `AppConfig.ready()`;
core calls each hook inside the same transaction as the change. Never Django signals.

- `event_created_from_type(event, event_type, actor)`: after template-apply on create_event
  (the booths overlay adds one Booth per TypeBooth).
- `registrations_changed(registrations, actor)`: after registrations are created or change state
  (the leads overlay upserts the event's lead request). Until that overlay is installed the
  list is empty and nothing happens. A hook that only writes can be a `RidingHook`: the
  booking (registrations.register) and a transition (registrations.transitions._transition)
  then call its `ride` before they send their write statement, and the statements `ride` returns
  (events.db.rows.Rider) run inside that statement, in the same snapshot as the verb's
  own writes; every other caller calls the hook as usual. The booking and the transitions
  call the other hooks after their writes were sent, so a hook that reads sees them (a
  transition then leaves its COMMIT to its atomic block).
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

event_created_from_type: list[Callable[..., Any]] = []
registrations_changed: list[Callable[..., Any]] = []
reference_data: list[Callable[..., Any]] = []
seed_demo_type: list[Callable[..., Any]] = []
seed_demo: list[Callable[..., Any]] = []
periodic_tasks: list[dict[str, Any]] = []
sale_order_lines: dict[str, Callable[..., Any]] = {}
catalogs: dict[str, Callable[..., Any]] = {}
template_previews: list[Callable[..., str]] = []
startup_checks: list[Callable[[], None]] = []


@dataclass(frozen=True)
class RidingHook:
    """A `registrations_changed` hook with a second form for the booking: `ride(registrations,
    actor)` returns the statements to run inside the booking's write statement (a list of
    events.db.rows.Rider, each setting up what it needs after commit itself) instead of
    running its own; calling the hook runs `run`."""

    run: Callable[..., Any]
    ride: Callable[..., Sequence[Any]]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.run(*args, **kwargs)


def run(hooks: list[Callable[..., Any]], *args: Any, **kwargs: Any) -> None:
    for hook in hooks:
        hook(*args, **kwargs)


def ride(hooks: list[Callable[..., Any]], *args: Any) -> tuple[list[Any], list[Callable[..., Any]]]:
    """The riders of the list's `RidingHook`s for these arguments, and the other hooks, which
    the caller runs (`run`) once its statement was sent."""
    riders: list[Any] = []
    others: list[Callable[..., Any]] = []
    for hook in hooks:
        if isinstance(hook, RidingHook):
            riders.extend(hook.ride(*args))
        else:
            others.append(hook)
    return riders, others
