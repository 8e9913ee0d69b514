"""Every admin page a staff member can open renders (no 500), on the demo data."""

import pytest
from django.contrib import admin
from django.core.management import call_command

from tests.events import factories

MODELS = sorted(admin.site._registry, key=lambda m: m._meta.label)


@pytest.fixture
def demo(db):
    call_command("seed_demo", verbosity=0)


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
    first = model._default_manager.order_by("pk").first()
    if first is not None:
        change = root_client.get("/admin/{}/{}/{}/change/".format(*info, first.pk))
        assert change.status_code == 200


def _request(client):
    from django.contrib.auth import get_user_model
    from django.test import RequestFactory

    request = RequestFactory().get("/admin/")
    request.user = get_user_model().objects.get(username="root")
    return request
