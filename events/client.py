"""The client address of a request (spec.md §7.5).

It is `REMOTE_ADDR`, except when `REMOTE_ADDR` is the trusted proxy (EVENT_TRUSTED_PROXY, empty:
no proxy trusted): then it is the rightmost `X-Forwarded-For` entry, the one that proxy added.
Entries further left were written by the client and are never trusted.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "") or ""
    proxy = settings.EVENT_TRUSTED_PROXY
    if proxy and remote == proxy:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "") or ""
        entries = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
        if entries:
            return entries[-1]
    return remote
