"""The import picture (docs/spec.md "Import rules"): who may name whom, checked on the source.

Rules, over the top-level packages of the product:
- core (`events`, `config`) never imports an overlay (`sms`, `booths`, `leads`, `desk`, `seams`);
- `booths` and `leads` never import each other;
- `desk` and `leads` never import `seams`;
- the graph of imports between top-level packages has no cycle (overlay → core is the one
  direction between core and overlays; within core, `config` wires `events`, never the reverse).

"Imports" counts every way one module can name another: `import`/`from … import` at any depth
(function-level too), relative imports resolved against the importing module, string literals
given to `import_module`/`import_string`/`__import__`/`send_task`/`signature`, Celery
`{"task": "…"}` entries, lazy model references (`ForeignKey("app.Model")`, `to="app.model"`,
`apps.get_model("app", …)`), migration dependencies `("app", "0001_…")`, and every dotted
string in settings modules except INSTALLED_APPS (the one list where the project root names
every app).

Within the core app, the layers of docs/architecture.md (`CORE_LAYERS`): foundation, `events/db`
(the database machinery), `events/services` (the verbs), `events/read` (read models), the entry
points (views, forms, admin, tasks, commands). A module imports its own layer and those below; an
entry point never imports `events/db`, and neither does an overlay or config. An overlay has
the same shape: its verbs (`services/`) and reads (`selectors.py`) never import its entry points
(views, admin, urls, tasks, commands, dashboard panels). And no two modules
of the product import each other, directly or around a loop (`module_cycles`), function-level
imports included: a circle is broken by moving what both need below both, not by hiding an import.

`check_tree(root)` is the one checker: the tree test runs it on the checkout, and the throwaway
tests run it on a tree written in tmp_path, one per rule, to show it reports what it should.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = {"events", "config"}
OVERLAYS = {"sms", "booths", "leads", "desk", "seams"}
PACKAGES = CORE | OVERLAYS
# importer → packages it must never name
FORBIDDEN: dict[str, set[str]] = {
    **dict.fromkeys(CORE, OVERLAYS),
    "booths": {"leads"},
    "leads": {"booths", "seams"},
    "desk": {"seams"},
}
STRING_IMPORTERS = {"import_module", "import_string", "__import__", "send_task", "signature"}
MODEL_FIELDS = {"ForeignKey", "OneToOneField", "ManyToManyField"}
DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$")


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _string(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def imports_in(source: str, *, module: str, is_package: bool = False) -> set[str]:
    """Every module (or app label) that `source`, the text of `module`, names."""
    names: set[str] = set()
    settings_module = module.split(".")[-1].startswith("settings")
    installed_apps: set[int] = set()  # ids of string nodes inside INSTALLED_APPS
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the importing module's package
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = package[: len(package) - (node.level - 1)]
                names.add(".".join(base + ([node.module] if node.module else [])))
            else:
                names.add(node.module or "")
        elif isinstance(node, ast.Call):
            callee = _callee(node)
            first = _string(node.args[0]) if node.args else None
            if callee in STRING_IMPORTERS and first:
                names.add(first)
            elif callee == "get_model" and first:  # apps.get_model("app", "Model")
                names.add(first.split(".")[0])
            elif callee in MODEL_FIELDS or callee == "swappable_dependency":
                target = first or next(
                    (_string(k.value) for k in node.keywords if k.arg == "to"), None
                )
                if target and "." in target:
                    names.add(target.split(".")[0])
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if _string(key) == "task" and _string(value):
                    names.add(_string(value))
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            labels = {getattr(t, "id", None) for t in targets}
            if "dependencies" in labels and isinstance(node.value, ast.List | ast.Tuple):
                for item in node.value.elts:  # migration dependencies: ("app", "0001_…")
                    if isinstance(item, ast.Tuple) and item.elts and _string(item.elts[0]):
                        names.add(_string(item.elts[0]))
            if "INSTALLED_APPS" in labels and node.value is not None:
                installed_apps |= {id(n) for n in ast.walk(node.value)}
    if settings_module:
        for node in ast.walk(tree):
            text = _string(node)
            if text and id(node) not in installed_apps and DOTTED.match(text):
                names.add(text)
    return {name for name in names if name}


def check_tree(root: Path) -> list[str]:
    """The rules of the module docstring, over the packages found under `root`.

    Returns one line per broken rule (empty = the picture holds).
    """
    problems: list[str] = []
    edges: dict[str, set[str]] = {package: set() for package in PACKAGES}
    for package in sorted(PACKAGES):
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            module = ".".join(parts[:-1] if is_package else parts)
            source = path.read_text(encoding="utf-8")
            for name in sorted(imports_in(source, module=module, is_package=is_package)):
                target = name.split(".")[0]
                if target not in PACKAGES or target == package:
                    continue
                edges[package].add(target)
                if target in FORBIDDEN.get(package, set()):
                    problems.append(f"{path.relative_to(root)} imports {name}")
    for cycle in _cycles(edges):
        problems.append("import cycle between packages: " + " → ".join(cycle))
    modules = _modules(root)
    graph = {module: _module_edges(module, path, modules) for module, path in modules.items()}
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            wrong = _layer_rule(module, target)
            if wrong:
                problems.append(f"{modules[module].relative_to(root)} imports {target} ({wrong})")
    for cycle in module_cycles(graph):
        problems.append("import cycle between modules: " + " → ".join(cycle))
    return problems


# --- layers and module cycles ------------------------------------------------------------
# The core's layers, bottom to top (docs/architecture.md). A core module may import its own layer
# and the ones below it, except that the entry points never reach the database machinery; an
# overlay or config may import any core layer but the machinery. A module not listed is
# foundation (models, errors, hooks, ports, rules, inputs, …).
FOUNDATION, DB, SERVICES, READ, ENTRY = range(5)
LAYER_NAMES = ("foundation", "db", "services", "read", "entry")
CORE_LAYERS: tuple[tuple[str, int], ...] = (
    ("events.db", DB),
    ("events.migrations", DB),  # schema: may read the machinery's SQL, never a verb
    ("events.services", SERVICES),
    ("events.adapters", SERVICES),  # the ports' built-in implementations the verbs use
    ("events.template_plans", SERVICES),
    ("events.read", READ),
    *(
        (f"events.{name}", ENTRY)
        for name in (
            "views",
            "views_api",
            "views_waitlist",
            "views_docs",
            "intake_form",
            "waitlist_form",
            "admin",
            "urls",
            "tasks",
            "management",
            "apps",
            "health",
        )
    ),
)


def layer_of(module: str) -> int | None:
    """The core layer of `module`, None outside the core app."""
    if module.split(".")[0] != "events":
        return None
    for prefix, layer in CORE_LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return FOUNDATION


def _layer_rule(importer: str, target: str) -> str | None:
    """What is wrong with `importer` naming `target`, by the layers (None: allowed)."""
    low = layer_of(target)
    if low is None:
        return _overlay_rule(importer, target)
    high = layer_of(importer)
    if high is None:  # an overlay or config
        return "the database machinery is the core's own" if low == DB else None
    if high == ENTRY and low == DB:
        return "an entry point never reaches the database machinery"
    if low > high:
        return f"{LAYER_NAMES[high]} never imports {LAYER_NAMES[low]}"
    return None


# An overlay has the core's shape: its verbs (`services/`), reads (`selectors.py`), models and
# errors sit below its entry points, which nothing else of the overlay imports.
OVERLAY_ENTRY = {"views", "admin", "urls", "tasks", "management", "dashboard", "demo", "apps"}


def _overlay_rule(importer: str, target: str) -> str | None:
    inside, outside = importer.split("."), target.split(".")
    if inside[0] not in OVERLAYS or outside[0] != inside[0] or len(outside) < 2:
        return None
    if outside[1] in OVERLAY_ENTRY and (len(inside) < 2 or inside[1] not in OVERLAY_ENTRY):
        return "an overlay's verbs and reads never import its entry points"
    return None


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for package in sorted(PACKAGES):
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest known module that `name` (a module, or a module's attribute) lies in."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _module_edges(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules `module` names: `imports_in`'s names, where `from pkg import x` counts as the
    submodule `pkg.x` when there is one (Python runs `pkg/__init__` for it, an empty door)."""
    is_package = path.name == "__init__.py"
    source = path.read_text(encoding="utf-8")
    names = set(imports_in(source, module=module, is_package=is_package))
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base = package[: len(package) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            submodules = {f"{origin}.{alias.name}" for alias in node.names}
            if submodules & modules.keys():
                names.discard(origin)
                names |= submodules & modules.keys()
    edges = {_resolve(name, modules) for name in names}
    return {edge for edge in edges if edge and edge != module and not _is_door(edge, modules)}


def _is_door(module: str, modules: dict[str, Path]) -> bool:
    """A package's `__init__` that imports nothing (an app's label, `events.services` as a
    namespace): naming it adds no edge."""
    path = modules[module]
    return path.name == "__init__.py" and not imports_in(
        path.read_text(encoding="utf-8"), module=module, is_package=True
    )


def module_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of modules (Tarjan), smallest module first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_cycle(graph, group) for group in sorted(groups)]


def _one_cycle(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    start, members = group[0], set(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph.get(node, set()) & members):
            if nxt == start:
                return [*paths[node], start]
            if nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    return group  # unreachable for a strongly connected group


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One path per package that can reach itself (depth-first; the graph has 7 nodes)."""
    found = []
    for start in sorted(edges):
        stack = [(start, [start])]
        seen: set[str] = set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(edges[node]):
                if nxt == start:
                    found.append([*path, start])
                    stack.clear()
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


# --- the checkout --------------------------------------------------------------------------


def test_the_checkout_follows_every_import_rule():
    assert check_tree(ROOT) == []


def test_the_checker_reads_the_whole_checkout():
    """A checker that found no files would pass vacuously: it must see every package's imports."""
    found = {
        package: sum(1 for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)
        for package in PACKAGES
    }
    assert all(count >= 1 for count in found.values()), found
    models = (ROOT / "booths" / "models.py").read_text(encoding="utf-8")
    assert "events.models" in imports_in(models, module="booths.models")


# --- a throwaway tree per rule: the checker reports what it must ---------------------------


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Every package as an empty app, plus `files` (path → source)."""
    for package in PACKAGES:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("", encoding="utf-8")
    for relative, source in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return root


FORBIDDEN_CASES = [
    # (importer file, importing source, the name the report must carry)
    *[
        (f"{core}/services/thing.py", f"from {overlay}.models import X\n", f"{overlay}.models")
        for core in sorted(CORE)
        for overlay in sorted(OVERLAYS)
    ],
    ("booths/models.py", "import leads.models\n", "leads.models"),
    ("leads/services.py", "from booths import models\n", "booths"),
    ("desk/views.py", "from seams.models import SeamOrder\n", "seams.models"),
    ("leads/admin.py", "from seams import models\n", "seams"),
]


@pytest.mark.parametrize(
    ("path", "source", "name"),
    FORBIDDEN_CASES,
    ids=[case[0] + ":" + case[2] for case in FORBIDDEN_CASES],
)
def test_a_forbidden_import_is_reported(tmp_path, path, source, name):
    write_tree(tmp_path, {path: source})

    assert check_tree(tmp_path) == [f"{path} imports {name}"]


@pytest.mark.parametrize(
    ("path", "source", "name"),
    [
        # a function-level import
        ("events/services/a.py", "def f():\n    from sms import tasks\n", "sms"),
        # strings naming a module
        ("events/hooks.py", "import importlib\nimportlib.import_module('desk.x')\n", "desk.x"),
        ("events/ports.py", "import_string('sms.adapters.Queue')\n", "sms.adapters.Queue"),
        ("events/nudge.py", "app.send_task('leads.run_pass')\n", "leads.run_pass"),
        (
            "config/celery.py",
            "beat = {'x': {'task': 'sms.deliver', 'schedule': 60}}\n",
            "sms.deliver",
        ),
        (
            "config/settings.py",
            "EVENT_SMS_QUEUE = 'sms.adapters.Gateway'\n",
            "sms.adapters.Gateway",
        ),
        # lazy model references and migration dependencies
        ("events/selectors.py", "apps.get_model('seams', 'SeamOrder')\n", "seams"),
        ("booths/services.py", "apps.get_model('leads.Lead')\n", "leads"),
        ("events/models.py", "x = models.ForeignKey('booths.Booth', on_delete=C)\n", "booths"),
        (
            "desk/migrations/0001_initial.py",
            "dependencies = [('seams', '0001_initial')]\n",
            "seams",
        ),
        ("leads/migrations/0003_x.py", "f = models.ForeignKey(to='booths.booth')\n", "booths"),
    ],
)
def test_every_way_of_naming_a_module_counts(tmp_path, path, source, name):
    write_tree(tmp_path, {path: source})

    assert check_tree(tmp_path) == [f"{path} imports {name}"]


def test_allowed_imports_are_not_reported(tmp_path):
    write_tree(
        tmp_path,
        {
            "booths/models.py": "from events.models import Event\nfrom . import errors\n",
            "leads/models.py": "from events.models import Event\n",
            "seams/models.py": "from events import hooks\n",
            "desk/services.py": "from events.services import registrations\nimport booths\n",
            "config/urls.py": "from events import urls\n",
            "config/settings.py": "INSTALLED_APPS = ['events', 'sms', 'sms.apps.SmsConfig']\n",
            "events/module.py": "from .services import registrations\n",
            # relative imports are resolved: booths' own submodule `leads` is not the app
            "booths/leads.py": "",
            "booths/sub/__init__.py": "from ..leads import x\nfrom .. import leads\n",
            "booths/sub/m.py": "from ..leads import x\nfrom . import leads\n",
        },
    )

    assert check_tree(tmp_path) == []


@pytest.mark.parametrize(
    ("files", "cycle"),
    [
        (
            {"sms/a.py": "import desk\n", "desk/b.py": "from sms import a\n"},
            ["desk → sms → desk", "sms → desk → sms"],
        ),
        (
            {
                "config/urls.py": "import events.urls\n",
                "events/x.py": "from config import celery\n",
            },
            ["config → events → config", "events → config → events"],
        ),
    ],
)
def test_an_import_cycle_between_packages_is_reported(tmp_path, files, cycle):
    write_tree(tmp_path, files)

    assert check_tree(tmp_path) == [f"import cycle between packages: {c}" for c in cycle]


@pytest.mark.parametrize(
    ("path", "source", "name", "why"),
    [
        (
            "events/db/rows.py",
            "from events.services import audit\n",
            "events.services.audit",
            "db never imports services",
        ),
        (
            "events/services/a.py",
            "from events.read import selectors\n",
            "events.read.selectors",
            "services never imports read",
        ),
        (
            "events/rules.py",
            "from events.services import seats\n",
            "events.services.seats",
            "foundation never imports services",
        ),
        (
            "events/views.py",
            "def f():\n    from events.db import rows\n",
            "events.db.rows",
            "an entry point never reaches the database machinery",
        ),
        (
            "events/read/x.py",
            "from events import views\n",
            "events.views",
            "read never imports entry",
        ),
        (
            "desk/views.py",
            "from events.db import rows\n",
            "events.db.rows",
            "the database machinery is the core's own",
        ),
        (
            "config/auth.py",
            "from events.db.rows import fetch\n",
            "events.db.rows",
            "the database machinery is the core's own",
        ),
    ],
)
def test_a_module_above_its_layer_is_reported(tmp_path, path, source, name, why):
    files = {path: source}
    for module in (name, "events.views"):  # the target exists, as a module of its own
        files.setdefault(module.replace(".", "/") + ".py", "")
    for package in ("events/db", "events/services", "events/read"):
        files.setdefault(f"{package}/__init__.py", "")
    write_tree(tmp_path, files)

    assert check_tree(tmp_path) == [f"{path} imports {name} ({why})"]


@pytest.mark.parametrize(
    ("path", "source", "name"),
    [
        ("booths/services/bookings.py", "from booths import admin\n", "booths.admin"),
        ("desk/selectors.py", "def f():\n    from desk.views import g\n", "desk.views"),
    ],
)
def test_an_overlay_module_importing_its_entry_points_is_reported(tmp_path, path, source, name):
    write_tree(tmp_path, {path: source, name.replace(".", "/") + ".py": ""})

    assert check_tree(tmp_path) == [
        f"{path} imports {name} (an overlay's verbs and reads never import its entry points)"
    ]


def test_allowed_layer_imports_are_not_reported(tmp_path):
    write_tree(
        tmp_path,
        {
            "events/db/__init__.py": "",
            "events/db/rows.py": "from events import models\n",
            "events/services/__init__.py": "",
            "events/services/seats.py": "from events.db import rows\nfrom events import rules\n",
            "events/read/__init__.py": "",
            "events/read/selectors.py": (
                "from events.services import seats\nfrom events.db import rows\n"
            ),
            "events/views.py": (
                "from events.read import selectors\nfrom events.services import seats\n"
            ),
            "events/rules.py": "from events.models import Event\n",
            "events/models.py": "",
            "desk/views.py": (
                "from events.services import seats\nfrom events.read import selectors\n"
                "from desk import selectors as desk_selectors\n"
            ),
            "desk/selectors.py": "from desk import errors\n",
            "desk/errors.py": "",
            "desk/admin.py": "from desk import views\n",
        },
    )

    assert check_tree(tmp_path) == []


@pytest.mark.parametrize(
    ("files", "cycle"),
    [
        (
            {"events/a.py": "from events import b\n", "events/b.py": "import events.a\n"},
            "events.a → events.b → events.a",
        ),
        (  # around a loop of three, one of them at function level
            {
                "events/services/__init__.py": "",
                "events/services/intake.py": "from events.services import registrations\n",
                "events/services/registrations.py": "from events.services import waitlist\n",
                "events/services/waitlist.py": "def f():\n    from . import intake\n",
            },
            "events.services.intake → events.services.registrations → events.services.waitlist"
            " → events.services.intake",
        ),
        (  # inside one overlay
            {"desk/x.py": "from desk.y import f\n", "desk/y.py": "from .x import g\n"},
            "desk.x → desk.y → desk.x",
        ),
    ],
)
def test_an_import_cycle_between_modules_is_reported(tmp_path, files, cycle):
    write_tree(tmp_path, files)

    assert check_tree(tmp_path) == [f"import cycle between modules: {cycle}"]
