"""Create the database named by DATABASE_URL when it does not exist yet."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from psycopg import sql  # noqa: E402


def main() -> int:
    db = settings.DATABASES["default"]
    params = {
        "host": db["HOST"] or None,
        "port": db["PORT"] or None,
        "user": db["USER"] or None,
        "password": db["PASSWORD"] or None,
        "dbname": "postgres",
    }
    try:
        with psycopg.connect(**params, autocommit=True) as conn:
            exists = conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]]
            ).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(db["NAME"])))
                print(f"created database {db['NAME']}")
    except psycopg.OperationalError as exc:
        print(f"ERROR: PostgreSQL is not reachable ({exc})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
