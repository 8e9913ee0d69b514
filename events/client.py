"""The client address of a request (spec.md §7.5).

It is `REMOTE_ADDR`, except when `REMOTE_ADDR` is the trusted proxy (EVENT_TRUSTED_PROXY, empty:
no proxy trusted): then it is the rightmost `X-Forwarded-For` entry, the one that proxy added.
Entries further left were written by the client and are never trusted.

The entry is used as an address only when it is one (IPv4 or IPv6, also with a numeric port as
some proxies write it: `1.2.3.4:5678`, `[2001:db8::1]:5678`), in its canonical text (an
IPv4-mapped IPv6 address as its IPv4 address; an IPv6 zone id is refused); anything else
(a proxy passing on what the client wrote, a NUL, other scripts' digits) counts as the proxy
itself, as an absent header does. The address keys the rate limiter's and the login throttle's
counters: it is always a short, plain string.
"""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    remote = request.META.get("REMOTE_ADDR", "") or ""
    proxy = settings.EVENT_TRUSTED_PROXY
    if proxy and remote == proxy:
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "") or ""
        entries = [entry.strip() for entry in forwarded.split(",") if entry.strip()]
        if entries:
            return _address(entries[-1]) or remote
    return remote


def _address(entry: str) -> str | None:
    """`entry` as a canonical IP address, a numeric port dropped; None when it is not one."""
    host, port = entry, ""
    if entry.startswith("["):  # [IPv6]:port
        host, bracket, rest = entry[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else ""
    elif entry.count(":") == 1:  # IPv4:port
        host, _, port = entry.partition(":")
    if port and not (port.isascii() and port.isdigit() and len(port) <= 5):
        return None
    if "%" in host:  # an IPv6 zone id is free text: never a client's address
        return None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return None
    # An IPv4 client may reach an IPv6 proxy socket as ::ffff:a.b.c.d: one client, one key.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return str(address)
