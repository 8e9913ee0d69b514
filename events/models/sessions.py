"""Signed-in sessions (staff: the admin and the desk; attendees have no accounts).

Django's database session, with the signed-in user's id kept in a column beside the encoded
data (Django's `django_session` keeps it only inside the data). A request's session read then
reads its user and the user's grants in the same statement (config.sessions): one round trip
where Django's store and backend take two. Deleting a user deletes its sessions.

The column is not a foreign key in PostgreSQL (indexed, cascaded by Django's delete): a session
saved for a user deleted a moment before would otherwise fail its COMMIT, where Django's table
takes it and the next request is simply signed out (the reader finds no user).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models
from django.utils.module_loading import import_string


class StaffSession(AbstractBaseSession):
    # Set from the session's data on every save (config.sessions.SessionStore); None for a
    # session nobody is signed in to. The session's data stays the truth: the reader checks
    # that both name the same user.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        db_constraint=False,
    )

    class Meta(AbstractBaseSession.Meta):
        db_table = "events_staff_session"

    @classmethod
    def get_session_store_class(cls):
        # The configured engine's store (config.sessions), named by the setting: the models
        # import nothing of config.
        return import_string(f"{settings.SESSION_ENGINE}.SessionStore")
