"""Explicit hook lists through which overlays act on core events (spec.md §1).

Core never imports an overlay. An overlay appends its callable in its `AppConfig.ready()`;
core calls each hook inside the same transaction as the change. Never Django signals.

- `event_created_from_type(event, event_type, actor)`: after template-apply on create_event
  (the booths overlay adds one Booth per TypeBooth).
- `registrations_changed(registrations, actor)`: after registrations are created or change state
  (the leads overlay upserts the event's lead request). Until that overlay is installed the
  list is empty and nothing happens.
- `reference_data()`: re-create the overlay's group permissions after a test flush
  (`events.reference_data.ensure`); the overlay's own data migration grants them first.
- `seed_demo_type(event_type)`: `manage.py seed_demo` lets each overlay add its template lines
  to the demo event type (the booths overlay adds booth lines).
"""

from collections.abc import Callable
from typing import Any

event_created_from_type: list[Callable[..., Any]] = []
registrations_changed: list[Callable[..., Any]] = []
reference_data: list[Callable[..., Any]] = []
seed_demo_type: list[Callable[..., Any]] = []


def run(hooks: list[Callable[..., Any]], *args: Any, **kwargs: Any) -> None:
    for hook in hooks:
        hook(*args, **kwargs)
