"""What every process of the product pays before its first request or task: loading the app
(`django.setup()`, run by the web's workers, Celery's, beat and each management command) imports
none of the libraries only some requests need. The PDF drawing (reportlab, pypdf), the charts
(pygal), Pillow and the HTTP client of the SMS gateway and the webhooks (httpx, which brings
rich and pygments) are imported by the code that uses them: together they cost each process
about a third of a second and their memory."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

ON_DEMAND = ("reportlab", "pypdf", "pypdfium2", "pygal", "PIL", "httpx", "rich", "pygments")

LOADED = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
from django.urls import get_resolver
get_resolver().url_patterns  # the web's first request loads every view
print(json.dumps(sorted({name.partition(".")[0] for name in sys.modules})))
"""


def test_loading_the_app_and_its_routes_imports_no_library_only_some_requests_need():
    run = subprocess.run(
        [sys.executable, "-c", LOADED], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    loaded = set(json.loads(run.stdout.strip().splitlines()[-1]))
    assert "django" in loaded and "events" in loaded  # the control: the app did load
    assert sorted(loaded & set(ON_DEMAND)) == []
