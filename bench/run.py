"""Run the benchmarks (`make bench`) and print one table.

    .venv/bin/python bench/run.py [--quick] [--only B1 [--only B3 …]] [--reuse-db]

Discovers bench/b<N>_<name>.py, calls each module's `run(quick=…)`, prints the rows (bench,
what, measured, target, ok, checks) and writes bench/results/run.json. The bench database is
dropped and created anew first (`common.fresh_database`); `--reuse-db` keeps it as the last run
left it (quicker, but the runs then measure a database that grows from one run to the next).
Exits 1 only when a correctness check failed (a row with `checks_ok` False, e.g. an oversell)
or a bench crashed; a missed timing target never fails the run.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench import common  # noqa: E402

MODULE = re.compile(r"^b(\d+)_(\w+)\.py$")


def discover() -> list[tuple[str, Path]]:
    found = []
    for path in HERE.glob("b*_*.py"):
        match = MODULE.match(path.name)
        if match:
            found.append((int(match.group(1)), f"B{match.group(1)}", path))
    return [(label, path) for _, label, path in sorted(found)]


def load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench.{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test)")
    parser.add_argument(
        "--only", action="append", default=[], metavar="B<N>", help="run only these benches"
    )
    parser.add_argument(
        "--reuse-db",
        action="store_true",
        help="keep the bench database as the last run left it (default: drop it first)",
    )
    args = parser.parse_args(argv)
    only = {name.upper() for item in args.only for name in item.split(",") if name}

    benches = [(label, path) for label, path in discover() if not only or label in only]
    if not benches:
        print(f"no bench matches {sorted(only)}", file=sys.stderr)
        return 2
    if not args.reuse_db:
        common.fresh_database()
    common.setup()

    rows: list[dict] = []
    failed = False
    for label, path in benches:
        print(f"== {label} ({path.name})", flush=True)
        try:
            produced = load(path).run(quick=args.quick)
        except Exception as exc:  # noqa: BLE001 - reported as a failed row, the run goes on
            traceback.print_exc()
            produced = [
                {
                    "bench": label,
                    "what": path.stem,
                    "measured": "crashed",
                    "target": "",
                    "ok": None,
                    "checks": f"{type(exc).__name__}: {exc}"[:120],
                    "checks_ok": False,
                }
            ]
        for row in produced:
            print("   ", common.table([row]).splitlines()[-1], flush=True)
            failed |= row.get("checks_ok", True) is False
        rows.extend(produced)

    print()
    print(common.table(rows))
    common.write_result("run", {"quick": args.quick, "rows": rows})
    if failed:
        print("\nbench: a correctness check failed (see the checks column)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
