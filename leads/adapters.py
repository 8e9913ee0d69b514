"""The built-in lead sink (spec.md §11): leads written to the local `leads.Lead` table, shown in
the admin. Wired by `EVENT_LEAD_SINK=leads.adapters.LocalLeadSink` (.env.example); the code's
own default stays the refusing `events.ports.RefusingLeadSink`.

`BatchLeadSink` is the leads overlay's extension of the port: a sink that can take a whole batch
at once (`upsert_leads`); the pass uses it when the wired sink offers it, so a batch costs a
constant number of statements. Any `EventLeadSink` still works, one call per lead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from django.db import connection
from django.utils import timezone

from events.errors import NotFound
from events.ports import EventLeadSink
from leads.models import Lead

REF_PREFIX = "local:"
_FIELDS = (
    "name",
    "lead_type",
    "contact_name",
    "email",
    "phone",
    "company_name",
    "team_ref",
    "user_ref",
    "tag_refs",
    "utm",
    "description",
)


class BatchLeadSink(EventLeadSink):
    """A lead sink that can upsert a batch of leads at once; returns the refs in order."""

    def upsert_leads(self, *, items: Sequence[tuple[str | None, Mapping[str, Any]]]) -> list[str]:
        return [self.upsert_lead(lead_ref=ref, values=values) for ref, values in items]


def _row_values(values: Mapping[str, Any]) -> dict[str, Any]:
    row = {name: values.get(name, "") for name in _FIELDS}
    row["tag_refs"] = list(values.get("tag_refs") or [])
    row["utm"] = dict(values.get("utm") or {})
    row["event_id"] = values.get("event_id")
    return row


_TABLE = Lead._meta.db_table
_COLUMNS = (*_FIELDS, "event_id")
_TYPES = {"tag_refs": "jsonb", "utm": "jsonb", "event_id": "bigint"}
# One statement per batch: the rows travel as one JSON document (the ORM's bulk_create spends
# more time preparing values field by field, and psycopg more time quoting arrays, than
# PostgreSQL spends inserting them: bench B7).
_INSERT = f"""
    INSERT INTO {_TABLE} ({", ".join(_COLUMNS)}, created_at, updated_at)
    SELECT {", ".join(_COLUMNS)}, now(), now()
      FROM ROWS FROM (
               jsonb_to_recordset(%s::jsonb)
               AS ({", ".join(f"{c} {_TYPES.get(c, 'text')}" for c in _COLUMNS)})
           ) WITH ORDINALITY AS v({", ".join(_COLUMNS)}, n)
     ORDER BY n
 RETURNING id
"""  # noqa: S608 — table and column names from the model; values are a parameter


def _insert(rows: list[dict[str, Any]]) -> list[int]:
    """Insert the rows; their ids in the same order."""
    with connection.cursor() as cursor:
        cursor.execute(_INSERT, [json.dumps(rows)])
        # Ids come from the sequence in the order the rows are inserted (ORDER BY n).
        return sorted(pk for (pk,) in cursor.fetchall())


def _pk(lead_ref: str) -> int:
    if not lead_ref.startswith(REF_PREFIX) or not lead_ref[len(REF_PREFIX) :].isdigit():
        raise NotFound(f"{lead_ref!r} is not a local lead.", lead_ref=lead_ref)
    return int(lead_ref[len(REF_PREFIX) :])


class LocalLeadSink(BatchLeadSink):
    """Writes `leads.Lead` rows in the caller's transaction (a rolled-back batch leaves none)."""

    def upsert_lead(self, *, lead_ref: str | None, values: Mapping[str, Any]) -> str:
        return self.upsert_leads(items=[(lead_ref, values)])[0]

    def upsert_leads(self, *, items: Sequence[tuple[str | None, Mapping[str, Any]]]) -> list[str]:
        refs: list[str | None] = [ref for ref, _ in items]
        new = [i for i, (ref, _) in enumerate(items) if not ref]
        if new:
            pks = _insert([_row_values(items[i][1]) for i in new])
            for i, pk in zip(new, pks, strict=True):
                refs[i] = f"{REF_PREFIX}{pk}"
        updates = {_pk(ref): values for ref, values in items if ref}
        if updates:
            leads = Lead.objects.in_bulk(list(updates))
            missing = sorted(set(updates) - set(leads))
            if missing:
                raise NotFound(
                    f"Local leads {missing} do not exist.",
                    lead_ref=f"{REF_PREFIX}{missing[0]}",
                )
            now = timezone.now()
            for pk, lead in leads.items():
                for name, value in _row_values(updates[pk]).items():
                    setattr(lead, name, value)
                lead.updated_at = now
            Lead.objects.bulk_update(
                list(leads.values()), [*_FIELDS, "event", "updated_at"], batch_size=500
            )
        return [ref for ref in refs if ref is not None]
