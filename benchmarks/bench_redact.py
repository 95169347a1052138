"""What redaction costs where text enters the ledger: a command's 64 KiB output tail, a
1 MiB diff, a 64 KiB word, and the metric-name gate on the step path, each beside a
reference measured in the same run (one C pass over the same text; copying the rows).

    python benchmarks/bench_redact.py [--runs 7]

Each figure is the median of several runs; the machine is shared and noisy, so look at
the medians and the ratios, not single runs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from ledger.redact import redact, redact_code
from ledger.store.steps import _without_secret_metrics

LOG_LINES = [
    "[rank0]: step=500 loss=2.31 grad_norm=0.93 lr=0.0003 tps=14203.5 wait_s=0.02",
    "step 1662 | loss 2.3134 | lr 3.0e-04 | tokens/s 14,203 | mem 61.2GB",
    "{'loss': 2.3134, 'grad_norm': 0.93, 'learning_rate': 3e-05, 'epoch': 0.12}",
    "Epoch 1: 100%|##########| 500/500 [01:23<00:00, 6.01it/s, loss=2.31, v_num=3]",
    "torchrun --nproc_per_node 8 train.py --token-budget 49152 --max-tokens 4096",
    "Recompiling function forward in /workspace/model.py:123 triggered by guard failure",
    "saved s3://bucket/runs/eager/step_1000/model.safetensors (sha256 9f86d081884c7d65)",
]
DIFF_LINES = [
    "+        batch = sorted(batch, key=len)",
    "+        tokenizer.pad_token = tokenizer.eos_token",
    "-    cache = GpuBufferCache(persistent=True)",
    "+    cache = GpuBufferCache(persistent=cfg.compile)",
]


def median_seconds(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _sized(lines: list[str], size: int, head: str = "") -> str:
    text = head + "\n".join(lines * (size // sum(len(x) + 1 for x in lines) + 1))
    return text.encode()[:size].decode(errors="ignore")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    output = _sized(LOG_LINES, 64 * 1024)
    diff = _sized(DIFF_LINES, 1 << 20, "--- a/model.py\n+++ b/model.py\n@@ -1 +1 @@\n")
    word = "x" * 65536
    metrics = [(0, i, n, 1.0) for i in range(250_000) for n in ("lr", "grad_norm", "mfu", "x")]
    cases = [
        ("redact, 64 KiB of training output", lambda: redact(output), lambda: output.lower()),
        ("redact_code, a 1 MiB diff", lambda: redact_code(diff), lambda: diff.lower()),
        ("redact, one 64 KiB word", lambda: redact(word), lambda: word.lower()),
        (
            "metric-name gate, 1M metric rows",
            lambda: _without_secret_metrics(metrics),
            lambda: list(metrics),
        ),
    ]
    print(f"median of {args.runs} runs each; reference: str.lower() of the text, or a list copy")
    for name, work, reference in cases:
        seconds, floor = median_seconds(work, args.runs), median_seconds(reference, args.runs)
        ratio = seconds / floor
        print(f"  {name:<36} {seconds * 1000:8.1f} ms  {floor * 1000:7.2f} ms  {ratio:6.1f}x")


if __name__ == "__main__":
    main()
