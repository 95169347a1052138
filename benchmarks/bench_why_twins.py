"""False findings of `why` on twins: pairs of runs of the same process with nothing planted.

    .venv/bin/python benchmarks/bench_why_twins.py [--seeds 30]

For each seed, two pairs built by the tests' generators (tests/why_data.py): hook-like step
rows with heavy-tailed noise, a compile-slow start and a checkpoint every 200 steps in
both; and torchtitan logs with a compile warning at the start of both. Prints how many
pairs gave any finding (the tests require none), and, as the reference measured in the
same run, how many of the same pairs `compare` called a regression or an improvement.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from why_data import hook_rows, recompile_warning, titan_log

import ledger


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=30)
    args = parser.parse_args()
    pairs = found = verdicts = 0
    for seed in range(100, 100 + args.seeds):
        with tempfile.TemporaryDirectory() as tmp:
            lg = ledger.open(Path(tmp) / "ledger.db")
            for i, name in enumerate(("a", "b")):
                rows = hook_rows(
                    1000, seed=seed * 10 + i, wait_s=0.01,
                    extra_s=lambda s: 3.0 if s % 200 == 150 else 0.0,
                )  # fmt: skip
                lg.write_steps(name, rows)
            for i, name in enumerate(("c", "d")):
                log = titan_log(
                    Path(tmp) / f"train_{name}.log", 700, seed=seed * 10 + i,
                    before=lambda s: recompile_warning(s, 1) if s == 3 else [],
                )  # fmt: skip
                lg.ingest(log)
            for run, ref in (("b", "a"), ("d", "c")):
                pairs += 1
                result = lg.why(run, ref)
                found += bool(result.findings)
                verdicts += result.verdict in ("regression", "improvement")
            lg.close()
    print(f"twin pairs: {pairs}")
    print(f"pairs with any finding (why):       {found} ({100 * found / pairs:.1f} %)")
    print(f"pairs with a verdict (compare, ref): {verdicts} ({100 * verdicts / pairs:.1f} %)")


if __name__ == "__main__":
    main()
