"""spec.md §1: core never imports an overlay; overlays act through events.hooks."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OVERLAYS = {"sms", "booths", "leads", "desk", "seams"}


def imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


CORE_FILES = sorted(
    p for p in (ROOT / "events").rglob("*.py") if "__pycache__" not in p.parts
) + sorted((ROOT / "config").rglob("*.py"))


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_never_imports_an_overlay(path):
    assert imported_roots(path) & OVERLAYS == set()


def test_core_migrations_do_not_depend_on_overlays():
    for path in (ROOT / "events" / "migrations").glob("0*.py"):
        text = path.read_text(encoding="utf-8")
        for overlay in OVERLAYS:
            assert f'("{overlay}",' not in text, f"{path.name} depends on {overlay}"
