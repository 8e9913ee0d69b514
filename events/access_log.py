"""Logs without capability tokens (spec.md §7.1: a token is never logged).

config/gunicorn.py sets `logger_class = "events.access_log.TokenMaskingLogger"`: every atom
of the access line (path, request line, referer, headers, environ) has the token of
/my-tickets/<token>/, /ics/<token>.ics and /waitlist/offer/<token>/ replaced by a fixed mask,
and its control characters escaped (a CR/LF decoded from a path cannot forge a second line).
settings.LOGGING puts `TokenMaskingFilter` on Django's request loggers (an unexpected 500 logs
"Internal Server Error: <path>") and on the console handler: message, arguments and
traceback text are masked the same way; config/celery.py puts the filter on Celery's own
handlers (worker and beat).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from gunicorn.glogging import Logger, SafeAtoms

# Everything after /ics/, /my-tickets/ or /waitlist/offer/ up to the next "/", "?", "#", quote
# or " HTTP/" (PATH_INFO is decoded: a mangled token may hold spaces).
TOKEN_PATH = re.compile(r"/(my-tickets|ics|waitlist/offer)/(?:(?! HTTP/)[^/?#\"])+")
MASK = "***"


# C0/C1 controls, DEL and the Unicode line/paragraph separators: any of them in a logged
# value could end the line early and forge the next one.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def mask(value: str) -> str:
    return TOKEN_PATH.sub(lambda m: f"/{m.group(1)}/{MASK}", value)


def escape_controls(value: str) -> str:
    """`\\xNN` / `\\uNNNN` for every control character: a logged value stays on its line.
    (The backslash itself is escaped too, so an escaped "\\x0a" cannot be faked either.)"""
    value = value.replace("\\", "\\\\")
    return CONTROL.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), value)


class _MaskedAtoms(SafeAtoms):
    """Gunicorn's SafeAtoms (case-insensitive header and environ atoms, "-" when missing,
    quotes escaped), masking and control-escaping an atom when the line's format reads it.
    Gunicorn passes every request header and environ entry as an atom; a line reads a few, so
    the rest are never touched (masking them all cost ~55 µs per request)."""

    def __init__(self, atoms: Mapping[str, object]) -> None:
        dict.__init__(self, atoms)  # raw values: SafeAtoms' own quote escaping comes last here

    def __getitem__(self, key: str) -> object:
        value = super().__getitem__(key)
        if isinstance(value, str):
            return escape_controls(mask(value)).replace('"', '\\"')
        return value


class TokenMaskingLogger(Logger):
    """Gunicorn's logger with every access-line atom token-masked and control-escaped: a percent-
    encoded CR/LF in a path (decoded into PATH_INFO) cannot forge a second access line."""

    atoms_wrapper_class = _MaskedAtoms


def _masked(value: object) -> object:
    return mask(value) if isinstance(value, str) else value


class TokenMaskingFilter(logging.Filter):
    """Masks tokens in a record in place, so every handler after it sees the masked text: the
    message is formatted (arguments of any type included) and, when it holds a token, replaced
    by its masked text. Records without a token are left as they are."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            # A malformed format: the handler reports it; mask what it will print.
            record.msg = _masked(record.msg)
            if isinstance(record.args, Mapping):
                record.args = {key: _masked(value) for key, value in record.args.items()}
            elif isinstance(record.args, tuple):
                record.args = tuple(_masked(value) for value in record.args)
        else:
            masked = mask(message)
            if masked != message:
                record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            # The formatter reuses exc_text: format the traceback once, masked.
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        record.exc_text = _masked(record.exc_text)
        record.stack_info = _masked(record.stack_info)
        return True


def owner_only(path: Path) -> Path:
    """Create the log file (and its folder) readable by its owner only, whatever the umask; a
    file left by an earlier run is narrowed to 0600 too."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    path.chmod(0o600)
    return path
