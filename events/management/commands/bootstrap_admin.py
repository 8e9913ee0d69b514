"""Create the staff superuser `admin` once and print its login (make run)."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand
from django.db import IntegrityError, transaction

USERNAME = "admin"


class Command(BaseCommand):
    help = "Create the superuser 'admin' with a random password, once, and print the login."

    def handle(self, *args, **options):
        password = secrets.token_urlsafe(12)
        try:
            # Insert, and let the unique username decide (two `make run` at once: one wins).
            with transaction.atomic():
                get_user_model().objects.create_superuser(USERNAME, "admin@localhost", password)
        except IntegrityError:
            self.stdout.write(
                f"Staff login: user '{USERNAME}' (its password was printed when it was created; "
                f"reset it with: .venv/bin/python manage.py changepassword {USERNAME})"
            )
            return
        self.stdout.write(
            self.style.SUCCESS(f"Staff login: user '{USERNAME}', password '{password}'")
        )
