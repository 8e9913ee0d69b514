"""`manage.py seam_inbox --list [--status parked]` and `--replay ID` (interfaces.md)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from events.errors import DomainError
from events.services.audit import Actor
from seams import selectors
from seams.models import InboxStatus
from seams.services import replay


class Command(BaseCommand):
    help = "List the sale seam's inbox, or replay one parked message."

    def add_arguments(self, parser):
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--list", action="store_true", help="list inbox messages")
        group.add_argument("--replay", type=int, metavar="ID", help="replay a parked message")
        parser.add_argument("--status", choices=InboxStatus.values, help="with --list")
        parser.add_argument("--limit", type=int, default=100, help="with --list (default 100)")

    def handle(self, *args, **options):
        if options["list"]:
            self._list(options["status"], options["limit"])
            return
        inbox_id = options["replay"]
        try:
            result = replay(inbox_id=inbox_id, actor=Actor("system", label="manage.py seam_inbox"))
        except DomainError as error:
            raise CommandError(f"{error.code}: {error.message}") from error
        if result.payload.get("replayed") is False:
            self.stdout.write(f"#{inbox_id}: not parked ({result.status}); nothing to replay.")
        elif result.status == InboxStatus.PARKED:
            error = result.payload["error"]
            raise CommandError(f"#{inbox_id}: still parked — {error['code']}: {error['message']}")
        else:
            self.stdout.write(f"#{inbox_id}: {result.status}")

    def _list(self, status: str | None, limit: int) -> None:
        rows = selectors.inbox(status=status)[:limit]
        self.stdout.write(
            f"{'id':>6}  {'status':9}  {'type':16}  {'order':12}  {'error':20}  message id"
        )
        for row in rows:
            self.stdout.write(
                f"{row.pk:>6}  {row.status:9}  {row.type:16}  {row.order_ref or '-':12}  "
                f"{row.error_code or '-':20}  {row.message_id}"
            )
