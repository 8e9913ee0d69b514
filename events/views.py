"""Thin views: each reads through selectors or calls a service."""

from django.http import JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from events import health, selectors


@require_GET
def healthz(request):
    report = health.probe()
    status = 200 if all(v == "ok" for v in report.values()) else 503
    return JsonResponse(report, status=status)


@require_GET
def event_list(request):
    events = selectors.public_events(now=timezone.now())
    return render(request, "events/event_list.html", {"events": events})
