"""Booth row locks, always in ascending id order so two verbs that lock several booths (two
orders sharing booths) queue instead of deadlocking.

The booths overlay never locks an Event row: the booth row is the one lock that serialises a
booth's bookings, so the seam may lock its events (tickets) before or after, without a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable

from booths.models import Booth


def lock_booths(booth_ids: Iterable[int]) -> dict[int, Booth]:
    ids = sorted(set(booth_ids))
    rows = Booth.objects.select_for_update(of=("self",)).filter(pk__in=ids).order_by("pk")
    return {booth.pk: booth for booth in rows}


def lock_booth(booth_id: int) -> Booth:
    return Booth.objects.select_for_update(of=("self",)).get(pk=booth_id)
