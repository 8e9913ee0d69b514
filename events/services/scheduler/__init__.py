"""Communication schedulers (spec.md §6), one module per concern:

- `dates`: every scheduled date and slot time (the only owner of that arithmetic);
- `verbs`: `add_scheduler`, `delete_scheduler`, `reschedule`, `on_template_deleted`,
  `registrations_opened` (after_sub rows in the registration transaction; the booking's own
  statement writes `after_sub_rows` and calls `arm_after_sub`);
- `passes`: `run_pass` and its `PassReport`, batch by batch under `SKIP LOCKED` claims.

The pinned names (interfaces.md) are exported here; callers import the package.
"""

from events.services.scheduler.dates import ARM_WINDOW
from events.services.scheduler.passes import PassReport, run_pass
from events.services.scheduler.verbs import (
    add_scheduler,
    after_sub_rows,
    arm_after_sub,
    delete_scheduler,
    on_template_deleted,
    registrations_opened,
    reschedule,
)

__all__ = [
    "ARM_WINDOW",
    "PassReport",
    "add_scheduler",
    "after_sub_rows",
    "arm_after_sub",
    "delete_scheduler",
    "on_template_deleted",
    "registrations_opened",
    "reschedule",
    "run_pass",
]
