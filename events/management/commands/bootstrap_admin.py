"""Create the staff superuser `admin` once and print its login (make run)."""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the superuser 'admin' with a random password, once, and print the login."

    def handle(self, *args, **options):
        User = get_user_model()
        if User.objects.filter(username="admin").exists():
            self.stdout.write(
                "Staff login: user 'admin' (its password was printed when it was created; "
                "reset it with: .venv/bin/python manage.py changepassword admin)"
            )
            return
        password = secrets.token_urlsafe(12)
        User.objects.create_superuser("admin", "admin@localhost", password)
        self.stdout.write(self.style.SUCCESS(f"Staff login: user 'admin', password '{password}'"))
