"""An example investigation, end to end, on a fresh ledger: what `make demo` shows.

It plays the debugging loop of DESIGN.md with local stand-ins for the remote box: a
hypothesis, a patch of train.py, deploy steps (compile, copy, relaunch), one of which
ships a stale build (drift), and a relaunch whose command carries a secret that must not
reach the ledger file.
"""

from __future__ import annotations

import contextlib
import difflib
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ledger import records
from ledger.store import Ledger

ORIGINAL = """\
import torch

def build_model(cfg):
    model = Drafter(cfg)
    # every step copies the mask buffers to the GPU again
    model.buffer_cache = GpuBufferCache(persistent=True)
    return torch.compile(model)
"""

PATCHED = """\
import torch

def build_model(cfg):
    model = Drafter(cfg)
    # the persistent GPU buffer cache only pays off when compiled; eager copies per step
    model.buffer_cache = GpuBufferCache(persistent=cfg.compile)
    return torch.compile(model) if cfg.compile else model
"""

FAKE_TOKEN = "hf_" + "DemoSecretTokenDoNotStore1234567890"


@dataclass(frozen=True)
class DemoResult:
    folder: Path
    db: Path
    timeline: list[records.TimelineEntry]
    drift_steps: list[int]


def run_demo(folder: Path, say: Callable[[str], None] = print) -> DemoResult:
    """Build the example investigation in `folder` (its ledger is folder/.ledger/ledger.db)."""
    folder.mkdir(parents=True, exist_ok=True)
    db = folder / ".ledger" / "ledger.db"
    if db.exists():
        db.unlink()
        for extra in ("-wal", "-shm"):
            Path(str(db) + extra).unlink(missing_ok=True)
    box = folder / "box"  # stands in for the training host
    build = folder / "build"
    box.mkdir(exist_ok=True)
    build.mkdir(exist_ok=True)
    train = folder / "train.py"
    train.write_text(ORIGINAL)
    shutil.copy(train, build / "train.py")  # yesterday's build, about to go stale

    with Ledger.open(db, create=True) as lg:
        lg.set_baseline(14200, "tok/s")
        say("baseline 14,200 tok/s; today's runs sit at 10-11K")
        h = lg.add_hypothesis(
            "torch.compile recompiles because flex-attention mask closures change"
        )
        say(f"hypothesis #{h.id}: {h.text}")

        train.write_text(PATCHED)
        diff = "".join(
            difflib.unified_diff(
                ORIGINAL.splitlines(True), PATCHED.splitlines(True), "a/train.py", "b/train.py"
            )
        )
        fix = lg.record_fix(
            h.id,
            "gate the GPU buffer cache to compiled mode",
            diff=diff,
            files=[train],
            run="eager_dynamiccopy",
        )
        say(f"patch #{fix.patch_id} → run eager_dynamiccopy; train.py {fix.files[0].sha256[:12]}")

        # Deploy from the project folder, as a person would, so commands read short.
        with contextlib.chdir(folder):
            steps = _deploy_steps(lg)
        for s in steps:
            drift = {True: "  DRIFT: stale file shipped", False: "  matches the patch", None: ""}
            say(f"deploy {s.name}: exit {s.exit_code}{drift[s.drift]}")
        timeline = lg.timeline()
    return DemoResult(folder, db, timeline, [s.id for s in steps if s.drift])


def _deploy_steps(lg: Ledger) -> list[records.DeployStep]:
    run = "eager_dynamiccopy"
    copy = ["cp", "build/train.py", "box/train.py"]
    python = "python3" if shutil.which("python3") else sys.executable
    steps = [lg.deploy(run, "compile", [python, "-m", "py_compile", "train.py"])]
    # The build folder still holds yesterday's file: this copy ships it (drift).
    steps.append(lg.deploy(run, "copy", copy, artifact="build/train.py"))
    shutil.copy("train.py", "build/train.py")
    steps.append(lg.deploy(run, "copy", copy, artifact="build/train.py"))
    relaunch = f"HF_TOKEN={FAKE_TOKEN} echo relaunching {run} in container 200"
    steps.append(lg.deploy(run, "relaunch", ["sh", "-c", relaunch]))
    return steps
