"""Every admin page a staff member can open renders (no 500), on the demo data: the changelist,
the add page, and a change page for EVERY registered model — a model the demo data leaves empty
gets a row from its app's factory (tests/<app>/factories.py) or a maker below."""

import importlib
import inspect
from pathlib import Path

import factory
import pytest
from django.contrib import admin
from django.contrib.auth.models import Group
from django.utils import timezone

from tests.events import factories

MODELS = sorted(admin.site._registry, key=lambda m: m._meta.label)
TESTS = Path(__file__).resolve().parents[2]


def _linked_product():
    event = factories.EventFactory(is_published=True)
    factories.TicketFactory(event=event, product_ref="SKU-SMOKE")


def _axes(model_name: str):
    def make():
        from axes import models as axes

        model = getattr(axes, model_name)
        fields = {"ip_address": "127.0.0.1", "user_agent": "smoke", "username": "root"}
        if model_name == "AccessLog":
            fields["attempt_time"] = timezone.now()
        elif model_name == "AccessAttempt":
            fields.update(
                attempt_time=timezone.now(), get_data="", post_data="", failures_since_start=1
            )
        elif model_name == "AccessFailureLog":
            fields["attempt_time"] = timezone.now()
        model.objects.bulk_create([model(**fields)])  # no signals: axes' handler reacts to saves

    return make


# Rows no factory makes: a database view and third-party models.
MAKERS = {
    "events.LinkedProduct": _linked_product,
    "auth.Group": lambda: Group.objects.create(name="smoke"),
    "axes.AccessAttempt": _axes("AccessAttempt"),
    "axes.AccessFailureLog": _axes("AccessFailureLog"),
    "axes.AccessLog": _axes("AccessLog"),
}


def _factories_by_model() -> dict:
    found = {}
    for path in sorted(TESTS.glob("*/factories.py")):
        module = importlib.import_module(f"tests.{path.parent.name}.factories")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, factory.django.DjangoModelFactory) and obj._meta.model:
                found.setdefault(obj._meta.model, obj)
    return found


def _ensure_row(model) -> None:
    if model._default_manager.exists():
        return
    maker = MAKERS.get(model._meta.label)
    if maker is None:
        made_by = _factories_by_model().get(model)
        if made_by is None:
            pytest.fail(f"no factory or maker makes a {model._meta.label} row for the smoke test")
        maker = made_by
    maker()


@pytest.fixture
def demo(demo_data, db):
    """The demo data (seeded once for the module: tests/conftest.py `demo_data`)."""


@pytest.fixture
def root_client(client):
    client.force_login(factories.UserFactory(username="root", is_superuser=True))
    return client


@pytest.mark.django_db
@pytest.mark.parametrize("model", MODELS, ids=lambda m: m._meta.label)
def test_changelist_add_and_change_pages_render(model, demo, root_client):
    info = (model._meta.app_label, model._meta.model_name)
    assert root_client.get("/admin/{}/{}/".format(*info)).status_code == 200
    add = root_client.get("/admin/{}/{}/add/".format(*info))
    model_admin = admin.site._registry[model]
    expected_add = 200 if model_admin.has_add_permission(_request(root_client)) else 403
    assert add.status_code == expected_add
    _ensure_row(model)
    first = model._default_manager.order_by("pk").first()
    assert first is not None
    change = root_client.get("/admin/{}/{}/{}/change/".format(*info, first.pk))
    assert change.status_code == 200


def _request(client):
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.get(username="root")
    return request
