"""The demo's local mailbox (`EMAIL_URL=filemail://`): Django's file backend, its files and folder
readable by their owner only.

Each delivery batch is a `var/mail/<stamp>-<id>.log` file holding whole mails, their live ticket
links included; Django creates them under the process's umask (world-readable with the usual
022). Here every file is created 0600 whatever the umask, and a missing folder 0700 (an existing
one is left as its owner set it).
"""

from __future__ import annotations

import os

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.mail.backends.filebased import EmailBackend


class OwnerOnlyFileBackend(EmailBackend):
    def __init__(self, *args, file_path: str | None = None, **kwargs) -> None:
        path = file_path or getattr(settings, "EMAIL_FILE_PATH", None)
        if path:
            try:
                os.makedirs(path, mode=0o700, exist_ok=True)
            except OSError as error:  # the same refusal as Django's backend gives
                raise ImproperlyConfigured(
                    f"Could not create directory for saving email messages: {path} ({error})"
                ) from error
        super().__init__(*args, file_path=file_path, **kwargs)

    def open(self) -> bool:
        if self.stream is None:
            fd = os.open(self._get_filename(), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self.stream = os.fdopen(fd, "ab")
            return True
        return False
