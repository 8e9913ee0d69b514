"""gunicorn's access log without capability tokens (spec.md §7.1: a token is never logged).

Procfile runs gunicorn with `--logger-class events.access_log.TokenMaskingLogger`: every atom
of the access line (path, request line, referer, headers, environ) has the token of
/my-tickets/<token>/ and /ics/<token>.ics replaced by a fixed mask.
"""

from __future__ import annotations

import re

from gunicorn.glogging import Logger

# Everything after /ics/ or /my-tickets/ up to the next "/", "?", "#", quote or " HTTP/"
# (PATH_INFO is decoded: a mangled token may hold spaces).
TOKEN_PATH = re.compile(r"/(my-tickets|ics)/(?:(?! HTTP/)[^/?#\"])+")
MASK = "***"


def mask(value: str) -> str:
    return TOKEN_PATH.sub(lambda m: f"/{m.group(1)}/{MASK}", value)


class TokenMaskingLogger(Logger):
    def atoms(self, resp, req, environ, request_time):
        atoms = super().atoms(resp, req, environ, request_time)
        return {k: mask(v) if isinstance(v, str) else v for k, v in atoms.items()}
