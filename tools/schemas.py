"""Publish the JSON Schema of every command's --json document in docs/schema/ (issue 32, item 6).

The schemas are defined once, in ``src/tierwise/documents/``; this tool writes them out so that the docs and
the package cannot drift (``tests/test_documents.py`` checks that the files are what it would write)::

    python tools/schemas.py write    # docs/schema/<document>.json for every document; stale files removed
    python tools/schemas.py check    # exit 1 if a file differs, is missing or is left over
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tierwise.documents import DOCUMENTS, schema  # noqa: E402

SCHEMA_DIR = ROOT / "docs" / "schema"


def rendered() -> dict[str, str]:
    """File name -> the text of that schema file."""
    return {f"{kind}.json": json.dumps(schema(kind), indent=2) + "\n" for kind in DOCUMENTS}


def differences() -> list[str]:
    """What ``write`` would change in docs/schema/ (empty when the files are current)."""
    want = rendered()
    have = {p.name: p.read_text() for p in SCHEMA_DIR.glob("*.json")} if SCHEMA_DIR.is_dir() else {}
    out = [f"{name}: missing" for name in sorted(set(want) - set(have))]
    out += [f"{name}: no such document (left over)" for name in sorted(set(have) - set(want))]
    out += [f"{name}: differs" for name in sorted(set(want) & set(have)) if want[name] != have[name]]
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["write"]:
        SCHEMA_DIR.mkdir(parents=True, exist_ok=True)
        want = rendered()
        for stale in set(p.name for p in SCHEMA_DIR.glob("*.json")) - set(want):
            (SCHEMA_DIR / stale).unlink()
        for name, text in want.items():
            (SCHEMA_DIR / name).write_text(text)
        print(f"wrote {len(want)} schemas in {SCHEMA_DIR.relative_to(ROOT)}")
        return 0
    if argv[:1] == ["check"]:
        diff = differences()
        for line in diff:
            print(line)
        print("docs/schema is current" if not diff else "run: python tools/schemas.py write")
        return 1 if diff else 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
