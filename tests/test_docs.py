"""The docs name only what exists: every file path and every `file.py::test_name` that a doc in
docs/ or the README cites in backticks is found in the checkout, and no doc names a path of one
machine (a home, a workspace, a temporary folder).

A path with a folder is taken from the project root (globs allowed, e.g. `tests/probes/*.py`);
a bare file name must match some file of the checkout; `::name` (globs allowed) must be a `def`
or `class` of that file; a lone `::name` after a cited file in the same line belongs to it.
`references(text)` is the one reader: the checkout test runs it on every doc, the throwaway
tests run it on a text to show that it reports what it should.
"""

from __future__ import annotations

import fnmatch
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SKIPPED_DIRS = {".git", ".venv", "node_modules", "test-output", "var", "staticfiles"}
TICKED = re.compile(r"`([^`\n]+)`")
FILE = re.compile(
    r"^(?:[\w.*-]+/)*[\w*-][\w.*-]*\.(?:py|md|sql|html|txt|js|css|yml|yaml|toml|json|conf|sh)$"
)
# Paths that are produced at run time, or outside the checkout by design.
GENERATED = ("bench/results/", "var/", "test-output/", "http:", "https:")
MACHINE_PATHS = re.compile(r"(?<![\w.])/(?:work|root|home|tmp|Users)/[\w.-]+")
DEF = re.compile(r"^\s*(?:async\s+)?(?:def|class)\s+(\w+)", re.M)


@cache
def _files() -> tuple[Path, ...]:
    return tuple(
        p
        for p in ROOT.rglob("*")
        if p.is_file() and not SKIPPED_DIRS.intersection(p.relative_to(ROOT).parts)
    )


def _resolve(path: str, root: Path) -> list[Path]:
    if "/" in path:
        return sorted(p for p in root.glob(path) if p.is_file())
    return [
        p
        for p in (_files() if root == ROOT else root.rglob("*"))
        if p.name == path or ("*" in path and fnmatch.fnmatchcase(p.name, path))
    ]


def _defines(files: list[Path], name: str) -> bool:
    name = name.split("[")[0]  # a parametrised id: the function is what must exist
    return any(
        fnmatch.fnmatchcase(found, name) for f in files for found in DEF.findall(f.read_text())
    )


def references(text: str, *, root: Path = ROOT) -> list[tuple[int, str, str]]:
    """(line number, cited text, what is wrong) for each citation of `text` that does not hold."""
    wrong = []
    for number, line in enumerate(text.splitlines(), 1):
        for machine in MACHINE_PATHS.findall(line):
            wrong.append((number, machine, "a path of one machine"))
        last: list[Path] | None = None
        for ticked in TICKED.findall(line):
            for part in re.split(r"[\s,()]+", ticked.strip()):
                path, _, name = part.partition("::")
                if not path and name and last is not None:
                    files = last
                elif FILE.match(path) and not path.startswith(GENERATED):
                    files = _resolve(path, root)
                    if not files:
                        wrong.append((number, part, "no such file"))
                        last = None
                        continue
                    last = files
                else:
                    continue
                if name and not _defines(files, name):
                    wrong.append((number, part, "no such def or class"))
    return wrong


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_cites_exists(doc: Path):
    assert references(doc.read_text()) == []


def test_a_missing_file_a_missing_test_and_a_machine_path_are_reported(tmp_path: Path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("def test_one():\n    pass\n")
    text = (
        "`tests/test_a.py::test_one`, `::test_two`\n"
        "`tests/test_b.py` and `test_a.py::test_o*`\n"
        "see /work/main/docs\n"
    )
    assert references(text, root=tmp_path) == [
        (1, "::test_two", "no such def or class"),
        (2, "tests/test_b.py", "no such file"),
        (3, "/work/main", "a path of one machine"),
    ]


def test_the_runbook_lists_every_task_beat_publishes_and_no_other():
    """The runbook's "Exactly one beat" paragraph names the whole schedule: the core's entries
    and the overlays' (joined through `events.hooks.periodic_tasks` when the worker loads)."""
    from config.celery import app, merge_periodic_tasks

    merge_periodic_tasks()
    scheduled = {entry["task"] for entry in app.conf.beat_schedule.values()}
    text = (ROOT / "docs" / "runbook.md").read_text()
    paragraph = text.split("Beat only publishes the periodic tasks:", 1)[1].split("\n\n", 1)[0]
    listed = set(re.findall(r"`(\w+\.\w+)`", paragraph))
    assert listed == scheduled


ISSUE_NUMBER = re.compile(r"\bissues? ?#?\d+", re.IGNORECASE)
SOURCE_SUFFIXES = {".py", ".md", ".html", ".txt", ".sh", ".toml", ".yml", ".sql", ".js", ".css"}


def test_no_doc_or_comment_cites_an_issue_number():
    """History belongs to git: the docs say what is true now and comments say why, so neither
    names the issue a change came from."""
    cited = [
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in _files()
        if path.suffix in SOURCE_SUFFIXES and path.name != "test_docs.py"
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        for match in [ISSUE_NUMBER.search(line)]
        if match
    ]
    assert cited == []
