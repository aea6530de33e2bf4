"""Record every experiment's claims at the smoke scale, the fixture of tests/test_claims_unchanged.py.

    python tools/smoke_claims.py                 # records every experiment into tests/data/smoke_claims.json
    python tools/smoke_claims.py mesa-ar ...     # records only these, keeps the others' records
    python tools/smoke_claims.py --same-claims X # X's numbers moved, its claims' definitions did not

A refactoring must leave every claim's value as it was: the test reruns each experiment at its smoke scale
(seed 0) and compares with this record. Rewrite the record only in a commit that changes a claim on purpose,
and say so in the commit. The record keeps each experiment's ``claims_version``: a claim whose test changes
changes its smoke record, and the tool refuses to record a changed claim under the version it was recorded with
(raise ``claims_version`` in the experiment's ``EXPERIMENT``, so that runs judged by the old definitions stop
counting), unless ``--same-claims`` says the definitions are the same and only the measured numbers moved. Claims
are compared as the test compares them (:func:`same`: floats within a relative 1e-4).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

RECORD = Path(__file__).resolve().parent.parent / "tests" / "data" / "smoke_claims.json"


# Far above a float32 rounding (two thread counts give results this close), far below any change of code.
RELATIVE = 1e-4


def same(a, b) -> bool:
    """``a`` and ``b`` equal, floats within :data:`RELATIVE` of each other (NaN equal to NaN)."""
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or isinstance(a, bool):
            return False
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=RELATIVE, abs_tol=1e-9)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    return a == b


def smoke_claims(experiment: str, out: Path) -> dict:
    """``{claim id: {"holds", "measured"}}`` of the experiment's smoke run (seed 0, on the CPU) into ``out``."""
    import iclab

    result = iclab.run(experiment, "smoke", out=out, progress=False, device="cpu")
    return {c["id"]: {"holds": c["holds"], "measured": c["measured"]} for c in result.claims}


def main(argv: list[str] | None = None) -> int:
    import iclab
    from iclab import experiments

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiments", nargs="*", help="the experiments to record (default: every one)")
    parser.add_argument("--same-claims", action="store_true", help="record changed claims under the same version")
    args = parser.parse_args(argv)
    names = args.experiments or [name for name, _ in iclab.list_experiments()]
    record = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    refused = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            version = experiments.get(name).claims_version
            claims = json.loads(json.dumps(smoke_claims(name, Path(tmp) / name)))
            old = record.get(name, {})
            if "claims" in old and not same(old["claims"], claims) and old.get("claims_version") == version:
                if not args.same_claims:
                    refused.append(name)
                    continue
            record[name] = {"claims_version": version, "claims": claims}
    RECORD.write_text(json.dumps(record, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    print(f"{RECORD}: {sum(len(r['claims']) for r in record.values())} claims of {len(record)} experiments")
    if refused:
        print(
            f"not recorded, their claims changed under the same claims_version: {', '.join(refused)} "
            "(raise it in the experiment's EXPERIMENT, or pass --same-claims if only numbers moved)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
