"""Record every experiment's claims at the smoke scale, the fixture of tests/test_claims_unchanged.py.

    python tools/smoke_claims.py   # rewrites tests/data/smoke_claims.json

A refactoring must leave every claim's value as it was: the test reruns each experiment at its smoke scale
(seed 0) and compares with this record. Rewrite the record only in a commit that changes a claim on purpose,
and say so in the commit.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

RECORD = Path(__file__).resolve().parent.parent / "tests" / "data" / "smoke_claims.json"


def smoke_claims(out: Path) -> dict:
    """``{experiment: {claim id: {"holds", "measured"}}}`` of every experiment's smoke run under ``out``."""
    import iclab

    record = {}
    for name, _ in iclab.list_experiments():
        result = iclab.run(name, "smoke", out=out / name, progress=False, device="cpu")
        record[name] = {c["id"]: {"holds": c["holds"], "measured": c["measured"]} for c in result.claims}
    return record


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        record = smoke_claims(Path(tmp))
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{RECORD}: {sum(map(len, record.values()))} claims of {len(record)} experiments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
