"""Print an attendee link (built on EVENT_PUBLIC_URL) for a registration: support staff send
it to an attendee who lost their mail. Exit 1 when there is no such link to give."""

from django.core.management.base import BaseCommand, CommandError

from events.errors import DomainError
from events.models import Registration
from events.services import capability, links


class Command(BaseCommand):
    help = "Print the tickets, order or calendar URL of a registration."

    def add_arguments(self, parser):
        parser.add_argument("registration_id", type=int)
        parser.add_argument("--purpose", choices=capability.REGISTRATION_PURPOSES, required=True)

    def handle(self, *args, registration_id, purpose, **options):
        registration = Registration.objects.filter(pk=registration_id, active=True).first()
        if registration is None:
            raise CommandError(f"No active registration {registration_id}.")
        if purpose == "order" and not registration.sale_order_ref:
            raise CommandError(f"Registration {registration_id} belongs to no sale order.")
        try:
            url = links.url_for(registration=registration, purpose=purpose)
        except DomainError as error:
            raise CommandError(f"{error.code}: {error.message}") from None
        self.stdout.write(url)
