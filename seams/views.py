"""The host routes (interfaces.md): the sale seam webhook and the catalog reads (linked
products; booths, read by the overlay that sells them through `events.hooks.catalogs`). Thin:
parse, call a service or selector, map the typed error to its status
(`events.errors.http_status`)."""

from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, JsonResponse

import seams.api_schemas  # noqa: F401 - the component schemas the operations below name
from events import hooks, inputs
from events.errors import Code, DomainError, NotFound, ValidationFailed, http_status
from events.models import Event
from events.openapi import api, json_answer, json_body, ref
from events.services import seats
from events.views_api import DATABASE_UNAVAILABLE, database_unavailable, json_methods
from seams import selectors
from seams.services import receive

logger = logging.getLogger(__name__)

HOST_TAG = "Host"
api.register_tag(HOST_TAG, "The host shop: the catalog reads and the signed sale seam.")
# Standard Webhooks: how the host signs each message (docs/integrators.md §1).
SIGNATURE_HEADERS = (
    {
        "name": "webhook-id",
        "required": True,
        "description": "The message id: stable across retries of one message, unique otherwise.",
        "schema": {
            "type": "string",
            "minLength": 1,
            "maxLength": 255,
            "pattern": "^[^\\u0000-\\u001f\\u007f]+$",
        },
    },
    {
        "name": "webhook-timestamp",
        "required": True,
        "description": "Unix seconds of this attempt; more than 300 s away from our clock is "
        "`stale_timestamp`.",
        "schema": {"type": "string", "pattern": "^[0-9]{1,12}$"},
    },
    {
        "name": "webhook-signature",
        "required": True,
        "description": 'Space-separated `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`; '
        "one that matches a secret of EVENT_SEAM_SECRET is enough.",
        "schema": {"type": "string", "minLength": 1},
    },
)
CATALOG_QUERY = (
    {
        "name": "event",
        "required": True,
        "description": "A published, active event (any other id answers 404).",
        "schema": {"type": "string", "pattern": f"^{inputs.QUERY_ID.pattern}$"},
    },
)


def _error(error: DomainError) -> JsonResponse:
    return JsonResponse(error.as_dict(), status=http_status(error.code))


@api.operation(
    "post",
    operation_id="receiveSaleMessage",
    summary="The sale seam: one signed message about a host order",
    description="Verified, recorded and applied exactly once per `webhook-id`, in one "
    "transaction; refusals before the inbox store nothing.",
    tags=[HOST_TAG],
    headers=SIGNATURE_HEADERS,
    body=json_body(ref("SaleMessage"), description="At most 256 KiB of UTF-8 JSON."),
    responses={
        200: json_answer("Applied, duplicate or stale.", ref("SaleAnswer")),
        409: json_answer(
            "Parked: refused for a business reason (`error.code`).", ref("SaleParked")
        ),
    },
    errors=(
        "invalid_signature",
        "stale_timestamp",
        "payload_too_large",
        "malformed_message",
        "secret_missing",
        "service_unavailable",
        "server_error",
        "body_unreadable",
        "request_timeout",
    ),
)
@json_methods("POST")
def sale_webhook(request: HttpRequest) -> JsonResponse:
    try:
        body = request.body
    except RequestDataTooBig:
        # Beyond Django's DATA_UPLOAD_MAX_MEMORY_SIZE the body is never read, so it cannot be
        # verified first: 413 at once (docs/integrators.md).
        return _error(DomainError("The body is too large.", code=Code.PAYLOAD_TOO_LARGE))
    try:
        result = receive(headers=request.headers, body=body)
    except DomainError as error:
        return _error(error)
    except DATABASE_UNAVAILABLE as error:
        # Nothing was stored, or (the connection lost at COMMIT) all of it: the host's retry of
        # this message id applies it or answers `duplicate`.
        return database_unavailable(error, api="sale seam")
    except Exception:
        # Nothing was stored (the transaction rolled back); the host retries this message.
        logger.exception("sale seam: unexpected error, message not stored")
        return JsonResponse(
            {"error": {"code": Code.SERVER_ERROR, "message": "Unexpected error; retry later."}},
            status=500,
        )
    return JsonResponse(result.payload, status=result.http_status)


@api.operation(
    "get",
    operation_id="catalogLinkedProducts",
    summary="The tickets of an event a host may sell, with their availability",
    tags=[HOST_TAG],
    query=CATALOG_QUERY,
    responses={200: json_answer("The event's ticket rows.", ref("LinkedProducts"))},
    errors=("invalid_value", "not_found", "service_unavailable"),
)
@json_methods("GET")
def catalog_linked_products(request: HttpRequest) -> JsonResponse:
    """The published ticket rows of one event with their availability (None = unlimited)."""
    try:
        return _catalog(request)
    except DomainError as error:
        return _error(error)
    except DATABASE_UNAVAILABLE as error:
        return database_unavailable(error, api="catalog read")


@api.operation(
    "get",
    operation_id="catalogBooths",
    summary="The booths of an event a host may sell (ids for a booth line's `booth_ids`)",
    tags=[HOST_TAG],
    query=CATALOG_QUERY,
    responses={200: json_answer("The event's booths.", ref("BoothCatalog"))},
    errors=("invalid_value", "not_found", "service_unavailable"),
)
@json_methods("GET")
def catalog_booths(request: HttpRequest) -> JsonResponse:
    """The booths of one event, as the overlay that sells them reads them
    (`events.hooks.catalogs["booths"]`): ids for the seam's booth lines, category, availability."""
    try:
        event = _catalog_event(request)
        read = hooks.catalogs.get("booths")
        if read is None:
            raise NotFound("This installation does not sell booths.", event=event.pk)
        return JsonResponse({"event": event.pk, "booths": read(event=event)})
    except DomainError as error:
        return _error(error)
    except DATABASE_UNAVAILABLE as error:
        return database_unavailable(error, api="catalog read")


def _catalog_event(request: HttpRequest) -> Event:
    """The published, active event the `event` query parameter names, or the typed refusal: 400
    `invalid_value` for what is not an id, 404 `not_found` for an id that names no such event
    (unknown, unpublished or archived alike: the public read reveals no hidden event)."""
    event_id = inputs.query_id(request.GET.get("event", ""))
    if event_id is None:
        raise ValidationFailed("event must be an event id.", field="event")
    event = selectors.catalog_event(event_id=event_id) if event_id <= inputs.BIGINT_MAX else None
    if event is None:
        raise NotFound("There is no published event with this id.", event=event_id)
    return event


def _catalog(request: HttpRequest) -> JsonResponse:
    event = _catalog_event(request)
    rows = list(selectors.linked_products(event_id=event.pk))
    available = _ticket_availability(event) if rows else {}
    return JsonResponse(
        {
            "event": event.pk,
            "products": [
                {
                    "event_id": row.event_id,
                    "event_name": row.event_name,
                    "ticket_id": row.ticket_id,
                    "ticket_name": row.ticket_name,
                    "product_ref": row.product_ref,
                    "price": str(row.price),
                    "currency": row.currency,
                    "start_sale_datetime": _iso(row.start_sale_datetime),
                    "end_sale_datetime": _iso(row.end_sale_datetime),
                    # missing = a multi-slot event without slots: nothing can be had
                    "available": available.get(row.ticket_id, 0),
                }
                for row in rows
            ],
        }
    )


def _ticket_availability(event: Event) -> dict[int, int | None]:
    """Per ticket, from the seat module in a fixed number of queries: the best over the
    event's slots on a multi-slot event (as `seats.availability` without a slot), None when no
    limit applies."""
    result: dict[int, int] = {}
    unlimited: set[int] = set()
    for (_, ticket_id), numbers in seats.ticket_summaries(event=event).items():
        if ticket_id is None:
            continue
        value = numbers["available"]
        if value is None:
            unlimited.add(ticket_id)
        elif ticket_id not in result or result[ticket_id] < value:
            result[ticket_id] = value
    return {**result, **dict.fromkeys(unlimited)}


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None
