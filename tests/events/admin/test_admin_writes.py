"""Every admin write path in the product calls a service: an AST check over events/, booths/,
leads/, seams/, sms/ and desk/ (STYLE.md §1, §4: every write is a service).

Each `save_model` / `delete_model` / `save_formset` / `delete_queryset` override must call a
name imported from a `services` module (or `save_inline_rows`, which routes each inline row to
the verbs its inline declares) and must not write a model itself: no `.save()`, `.delete()`,
`.create()`, `.update()`, `.bulk_create()`, `.set()`/`.add()`/`.remove()`/`.clear()`,
`form.save_m2m()`, `formset.save()`, nor a `super().save_model(...)`-style call."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
APPS = ("events", "booths", "leads", "seams", "sms", "desk")
TARGETS = {"save_model", "delete_model", "save_formset", "delete_queryset"}
WRITES = {
    "save",
    "delete",
    "create",
    "update",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
    "save_m2m",
    "set",
    "add",
    "remove",
    "clear",
}
ROUTERS = {"save_inline_rows"}  # events.admin.base: inline rows to their declared verbs


def _service_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and ".services" in f".{node.module}":
            names |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if ".services" in alias.name and alias.asname:
                    names.add(alias.asname)
    return names


def _root(node: ast.AST) -> ast.AST:
    while isinstance(node, ast.Attribute | ast.Call):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node


def problems_in(source: str, filename: str = "<source>") -> list[str]:
    tree = ast.parse(source)
    services = _service_names(tree) | ROUTERS
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name not in TARGETS:
                continue
            where = f"{filename}:{fn.lineno} {cls.name}.{fn.name}"
            calls = [n for n in ast.walk(fn) if isinstance(n, ast.Call)]
            if not any(
                isinstance(_root(c.func), ast.Name) and _root(c.func).id in services for c in calls
            ):
                found.append(f"{where}: calls no service")
            for call in calls:
                func = call.func
                if not isinstance(func, ast.Attribute):
                    continue
                receiver = func.value
                if isinstance(receiver, ast.Call) and getattr(receiver.func, "id", "") == "super":
                    found.append(f"{where}: super().{func.attr}() writes directly")
                elif func.attr in WRITES:
                    if isinstance(receiver, ast.Attribute) and receiver.attr == "__dict__":
                        continue  # copying a service's result onto the admin's instance
                    root = _root(func)
                    if isinstance(root, ast.Name) and root.id in services:
                        continue  # e.g. services.update_…: a verb, not a model write
                    found.append(f"{where}: .{func.attr}() writes a model directly")
    return found


def product_files() -> list[Path]:
    files = []
    for app in APPS:
        base = ROOT / app
        if base.is_dir():
            files += [p for p in base.rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def test_admin_write_overrides_in_the_product_call_services_only():
    checked = 0
    problems = []
    for path in product_files():
        source = path.read_text()
        if not any(f"def {name}(" in source for name in TARGETS):
            continue
        checked += 1
        problems += problems_in(source, str(path.relative_to(ROOT)))
    assert checked >= 5  # the core admin modules at least: the scan did look
    assert problems == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("obj.save()", ".save() writes a model directly"),
        ("super().save_model(request, obj, form, change)", "super().save_model()"),
        ("form.save_m2m()", ".save_m2m() writes a model directly"),
        ("formset.save()", ".save() writes a model directly"),
        ("Tag.objects.filter(pk=obj.pk).update(name='x')", ".update() writes a model directly"),
        ("obj.tags.set([])", ".set() writes a model directly"),
        ("pass", "calls no service"),
    ],
)
def test_the_check_catches_a_direct_write(body, expected):
    source = f"""
from events.services import reference

class BadAdmin:
    def save_model(self, request, obj, form, change):
        reference.update_tag(tag=obj, actor=request.user)
        {body}
"""
    if body == "pass":
        source = source.replace("reference.update_tag(tag=obj, actor=request.user)", "")
    problems = problems_in(source)
    assert any(expected in p for p in problems), problems


def test_the_check_accepts_a_service_call():
    source = """
from events.services import tickets

class GoodAdmin:
    def delete_model(self, request, obj):
        tickets.delete_ticket(ticket=obj, actor=request.user)
"""
    assert problems_in(source) == []
