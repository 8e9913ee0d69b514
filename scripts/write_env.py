"""Write .env from .env.example, replacing each `generate-me` with a fresh secret.

Leaves an existing target alone. Usage: python scripts/write_env.py [TARGET] [KEY=VALUE ...]
(the pairs override lines of the example, e.g. DATABASE_URL for a test run).
"""

import secrets
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / ".env"
    overrides = dict(arg.split("=", 1) for arg in sys.argv[2:])
    if target.exists():
        return 0
    lines = []
    for line in (ROOT / ".env.example").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not line.lstrip().startswith("#"):
            if key in overrides:
                value = overrides.pop(key)
            elif value == "generate-me":
                value = secrets.token_urlsafe(48)
            line = f"{key}={value}"
        lines.append(line)
    lines.extend(f"{key}={value}" for key, value in overrides.items())
    target.write_text("\n".join(lines) + "\n")
    target.chmod(0o600)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
