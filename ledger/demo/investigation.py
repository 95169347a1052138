"""The example investigation behind `ledger demo` and `make demo`, end to end.

It plays the story of a throughput hunt with local stand-ins for the remote box (a folder `box/`, a
fake `nvidia-smi` that prints what the real one would): a baseline near 14.2K tok/s;
a torch.compile run at ~10.5K with flex-attention recompilation warnings; an eager run
(eager_restored); an unpadded one (eager_unpadded); a persistent GPU buffer cache that dies
of CUDA OOM in the drafter's forward (eager_bufcache); and eager_dynamiccopy, which loads
851 weight shards and recovers. Each attempt has its hypothesis, patch (with a diff),
deploy steps — one of which would ship a stale file (drift) and is held before it runs —
probes with nvidia-smi output and a generated, realistic log; then everything is
ingested, compared, and drawn into a report.

The logs and numbers are seeded and deterministic; only the wall-clock times differ.
"""

from __future__ import annotations

import contextlib
import difflib
import shutil
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from ledger.demo.logs import RunStory, generate_log, loading_log, nvidia_smi_csv
from ledger.errors import OutputFileError
from ledger.usecases.ledger import Ledger

BASELINE = 14200.0
FAKE_TOKEN = "hf_" + "DemoSecretTokenDoNotStore1234567890"
NVSMI_QUERY = "--query-gpu=index,memory.used,utilization.gpu"
START = datetime(2026, 11, 28, 9, 0)


@dataclass(frozen=True)
class Attempt:
    """One fix attempt: what was believed, what changed, and how the run behaves."""

    story: RunStory
    hypothesis: str | None  # None: the run before any hypothesis (the reference)
    summary: str
    before: str
    after: str
    ship_stale_first: bool = False  # the first copy would ship yesterday's build (drift)


ATTEMPTS = [
    Attempt(
        RunStory("baseline", 14200, 1500, total_steps=1500, finished=True, seed=11),
        None,
        "last week's commit: the reference",
        "",
        "",
    ),
    Attempt(
        RunStory(
            "compiled", 10500, 1500, recompiles=6, seed=12, drop_at=900, drop_to=10150, stopped=True
        ),
        "torch.compile recompiles because flex-attention mask closures change",
        "today's config: torch.compile on the drafter with flex attention",
        "model = Drafter(cfg)\n",
        "model = torch.compile(Drafter(cfg))\n",
    ),
    Attempt(
        RunStory("eager_restored", 10950, 1500, seed=13, stopped=True),
        "torch.compile recompiles because flex-attention mask closures change",
        "run the drafter eagerly to take the compiler out of the picture",
        "model = torch.compile(Drafter(cfg))\n",
        "model = Drafter(cfg)  # eager: rule out recompiles\n",
    ),
    Attempt(
        RunStory("eager_unpadded", 10900, 1500, seed=14, stopped=True),
        "padding every batch to 8K tokens wastes a third of the compute",
        "pack variable-length sequences instead of padding to 8K",
        "batch = pad_to(batch, 8192)\n",
        "batch = pack_varlen(batch)  # no padding\n",
    ),
    Attempt(
        RunStory("eager_bufcache", 12300, 640, seed=15, oom_at=640),
        "host-to-device copies of the mask buffers stall the GPU every step",
        "keep the mask buffers in a persistent GPU buffer cache",
        "buffers = masks.to('cuda')\n",
        "buffers = gpu_cache.get(key, lambda: masks.to('cuda'))  # persistent\n",
    ),
    Attempt(
        RunStory("eager_dynamiccopy", 14090, 1500, total_steps=1500, finished=True, seed=16),
        "host-to-device copies of the mask buffers stall the GPU every step",
        "gate the GPU buffer cache to compiled mode; copy dynamically in eager",
        "buffers = gpu_cache.get(key, lambda: masks.to('cuda'))  # persistent\n",
        "buffers = gpu_cache.get(key) if cfg.compile else masks.to('cuda', non_blocking=True)\n",
        ship_stale_first=True,
    ),
]


@dataclass(frozen=True)
class DemoResult:
    folder: Path
    db: Path
    report: Path
    runs: list[str]
    drift_steps: list[int]
    verdict: str


def run_demo(folder: Path, say: Callable[[str], None] = print) -> DemoResult:
    """Build the example investigation in `folder`; its ledger is folder/.ledger/ledger.db."""
    folder = folder.resolve()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / ".ledger").mkdir(exist_ok=True)
    except OSError as exc:
        raise OutputFileError(
            f"cannot make the demo's folder {folder}: {exc.strerror or exc}"
        ) from exc
    db = folder / ".ledger" / "ledger.db"
    for old in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        old.unlink(missing_ok=True)
    for sub in ("box", "build"):
        shutil.rmtree(folder / sub, ignore_errors=True)
        (folder / sub).mkdir()
    _fake_nvidia_smi(folder / "box")

    with Ledger.open(db, create=True) as lg, contextlib.chdir(folder):
        lg.set_baseline(BASELINE, "tok/s")
        say("baseline 14,200 tok/s; today's runs sit at 10-11K")
        hypotheses: dict[str, int] = {}
        drift: list[int] = []
        previous_train = "model = Drafter(cfg)\n"
        for i, attempt in enumerate(ATTEMPTS):
            story = attempt.story
            began = START + timedelta(hours=1.5 * i)
            if attempt.hypothesis is None:
                lg.ensure_run(story.name)
            else:
                if attempt.hypothesis not in hypotheses:
                    hypotheses[attempt.hypothesis] = lg.add_hypothesis(attempt.hypothesis).id
                    say(f"hypothesis #{hypotheses[attempt.hypothesis]}: {attempt.hypothesis}")
                drift += _fix_and_deploy(
                    lg, attempt, hypotheses[attempt.hypothesis], previous_train
                )
                previous_train = attempt.after
            log = Path("box") / f"train_{story.name}.log"
            text = generate_log(story, began)
            if story.shards and attempt.hypothesis is not None:
                # The first look comes while the weights are still loading.
                log.write_text(loading_log(story, began, loaded=81))
                _probe(lg, story, log, loading=True, say=say)
            log.write_text(text)
            if attempt.hypothesis is not None:
                _probe(lg, story, log, loading=False, say=say)
            result = lg.ingest(log)
            say(f"ingest {log.name}: {result.steps:,} steps, fate {result.fate}")
        verdict = _conclude(lg, hypotheses, say)
        report = lg.write_report(folder / "report.html")
        runs = lg.run_names()
    return DemoResult(folder, db, report, runs, drift, verdict)


def _fix_and_deploy(lg: Ledger, attempt: Attempt, hypothesis_id: int, before: str) -> list[int]:
    """record-fix, then compile, copy (again after drift), relaunch; returns drifted step ids."""
    story = attempt.story
    Path("train.py").write_text(attempt.after)
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(True), attempt.after.splitlines(True), "a/train.py", "b/train.py"
        )
    )
    lg.record_fix(hypothesis_id, attempt.summary, diff=diff, files=["train.py"], run=story.name)
    python = "python3" if shutil.which("python3") else sys.executable
    run = story.name
    lg.deploy(run, "compile", [python, "-m", "py_compile", "train.py"])
    drifted = []
    if attempt.ship_stale_first:
        # build/ still holds the previous attempt's file: the drift check holds this copy
        # (its command does not run), so the box never gets the stale file.
        Path("build/train.py").write_text(before)
        step = lg.deploy(
            run, "copy", ["cp", "build/train.py", "box/train.py"], artifact="build/train.py"
        )
        drifted.append(step.id)
    shutil.copy("train.py", "build/train.py")
    lg.deploy(run, "copy", ["cp", "build/train.py", "box/train.py"], artifact="build/train.py")
    relaunch = (
        f"HF_TOKEN={FAKE_TOKEN} echo relaunching {run}: pct exec 200 -- "
        f"torchrun --nproc_per_node 8 train.py > box/train_{run}.log"
    )
    lg.deploy(run, "relaunch", ["sh", "-c", relaunch])
    return drifted


def _probe(
    lg: Ledger, story: RunStory, log: Path, *, loading: bool, say: Callable[[str], None]
) -> None:
    (log.parent / "gpus.csv").write_text(nvidia_smi_csv(story, loading=loading))
    command = f"tail -n 90 {log}; box/nvidia-smi {NVSMI_QUERY} --format=csv,noheader"
    result = lg.probe(story.name, ["sh", "-c", command])
    say(f"probe: {result.conclusion}")


def _conclude(lg: Ledger, hypotheses: dict[str, int], say: Callable[[str], None]) -> str:
    """The comparisons that settle each hypothesis, recorded with --resolve."""
    ids = list(hypotheses.values())
    settled = [
        ("compiled", "eager_restored", ids[0]),
        ("eager_restored", "eager_unpadded", ids[1]),
        ("eager_unpadded", "eager_dynamiccopy", ids[2]),
    ]
    last = ""
    for before, after, hypothesis in settled:
        report = lg.compare([before, after], resolve=hypothesis)
        last = report.comparisons[0].summary
        status = report.resolution.status if report.resolution else "?"
        say(f"compare {before} {after}: {last} → hypothesis #{hypothesis} {status}")
    return last


def _fake_nvidia_smi(box: Path) -> None:
    script = box / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n# stands in for the real one on the training host\n"
        'cat "$(dirname "$0")/gpus.csv"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
