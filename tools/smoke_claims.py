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


def smoke_claims(experiment: str, out: Path) -> dict:
    """``{claim id: {"holds", "measured"}}`` of the experiment's smoke run (seed 0, on the CPU) into ``out``."""
    import iclab

    result = iclab.run(experiment, "smoke", out=out, progress=False, device="cpu")
    return {c["id"]: {"holds": c["holds"], "measured": c["measured"]} for c in result.claims}


def main() -> int:
    import iclab

    with tempfile.TemporaryDirectory() as tmp:
        record = {name: smoke_claims(name, Path(tmp) / name) for name, _ in iclab.list_experiments()}
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{RECORD}: {sum(map(len, record.values()))} claims of {len(record)} experiments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
