"""`ledger import` as a user points it: trackio's own folder, an export named after its file,
fates from what each tracker's files say of an ending, per-rank series as ranks, and a
value logged at an old step since the last import. Every file is written by the tracker's
real library (trackio in a subprocess: it reads its folder once, when imported)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import run_cli
from tests.test_import import MLFLOW_SQLA, _mlflow_client, metrics_of, steps_of

tensorboard = pytest.importorskip("torch.utils.tensorboard")


def rank_steps(lg: Any, run: str) -> dict[tuple[int, int], dict[str, Any]]:
    frame = lg.steps_frame(run)
    return {(int(r["rank"]), int(r["step"])): dict(r) for r in frame.to_dict("records")}


# -- trackio -----------------------------------------------------------------------------

TRACKIO_SCRIPT = """
import os, sys
os.environ["TRACKIO_DIR"] = sys.argv[1]
import trackio

def run(project, name, steps, total=None, group=None, speed=1000.0):
    config = {"lr": 0.01} if total is None else {"lr": 0.01, "max_steps": total}
    trackio.init(project=project, name=name, group=group, config=config)
    for step in range(steps):
        trackio.log({"train/loss": 1.0 / (step + 1), "tps": speed + step}, step=step)
    trackio.finish()

run("bench", "eager", 8, total=8)          # its last step is the announced last: finished
run("bench", "cut", 3, total=8)            # stopped at 3 of 8: trackio records no ending
run("sweep", "compiled", 5)                # a second project in the same folder
run("ddp", "rank0", 4, group="ddp_eager", speed=900.0)  # a run per rank, grouped
run("ddp", "rank1", 4, group="ddp_eager", speed=800.0)
"""


@pytest.fixture(scope="module")
def trackio_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if importlib.util.find_spec("trackio") is None:  # not imported here: see the docstring
        pytest.skip("trackio is not installed")
    folder = tmp_path_factory.mktemp("trackio-home")
    done = subprocess.run(
        [sys.executable, "-c", TRACKIO_SCRIPT, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return folder


def test_trackios_folder_imports_every_project_in_it(lg: Any, trackio_folder: Path) -> None:
    assert sorted(p.name for p in trackio_folder.glob("*.db")) == ["bench.db", "ddp.db", "sweep.db"]
    (trackio_folder / "notes.db").write_text("not a SQLite file, so no project\n")
    result = lg.import_runs([trackio_folder])
    by_run = {(r.run, r.ranks): r for r in result.runs}
    assert set(by_run) == {
        ("eager", (0,)),
        ("cut", (0,)),
        ("compiled", (0,)),
        ("ddp_eager", (0,)),
        ("ddp_eager", (1,)),
    }
    assert sorted(steps_of(lg, "compiled")) == list(range(5))  # from the second project
    assert lg.import_runs([trackio_folder]).steps == 0


def test_a_trackio_run_that_reached_its_announced_total_is_finished(
    lg: Any, trackio_folder: Path
) -> None:
    result = lg.import_runs([trackio_folder / "bench.db"])
    fates = {r.run: r.fate for r in result.runs}
    assert fates == {"eager": "finished", "cut": "unknown"}
    assert "max_steps=8" in (lg.show("eager").fate_reason or "")


def test_trackio_runs_per_rank_land_as_ranks_of_their_group(lg: Any, trackio_folder: Path) -> None:
    lg.import_runs([trackio_folder / "ddp.db"])
    rows = rank_steps(lg, "ddp_eager")
    assert sorted(rows) == [(rank, step) for rank in (0, 1) for step in range(4)]
    assert [rows[(1, s)]["throughput"] for s in range(4)] == [800.0 + s for s in range(4)]
    assert [rows[(0, s)]["throughput"] for s in range(4)] == [900.0 + s for s in range(4)]
    assert "rank0" not in lg.run_names() and "rank1" not in lg.run_names()


# -- W&B export --------------------------------------------------------------------------


def test_an_exported_history_is_named_after_its_file(tmp_path: Path, db_url: str) -> None:
    export = tmp_path / "wandb_history.csv"
    export.write_text("_step,loss,tps\n0,1.5,100\n1,1.25,101\n")
    assert run_cli("init").exit_code == 0
    done = run_cli("import", str(export), "--json")
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["runs"][0]["run"] == "wandb_history"


# -- TensorBoard endings -----------------------------------------------------------------


def _steps(writer: Any, steps: range) -> None:
    for step in steps:
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
        writer.add_scalar("tokens_per_sec", 1000.0 + step, step)


def test_tensorboard_runs_get_the_fate_their_files_say(lg: Any, tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    runs = tmp_path / "runs"
    # torch's add_hparams at the end of training (with the final metrics): a session end
    # written after the last step, into a sub-folder that belongs to the run
    writer = tensorboard.SummaryWriter(str(runs / "closed"))
    _steps(writer, range(12))
    writer.add_hparams({"lr": 0.01, "compile": "max-autotune"}, {"hp/final_loss": 0.1})
    writer.close()
    # Lightning-style hyperparameters told as the run starts, announcing 20 steps
    for name, steps in (("complete", 20), ("stopped", 9)):
        writer = tensorboard.SummaryWriter(str(runs / name))
        writer.add_hparams({"max_steps": 20}, {"hp_metric": -1.0}, run_name=".")
        _steps(writer, range(steps))
        writer.close()
    # TF1's Supervisor ends a session with a SessionLog STOP event
    writer = tensorboard.SummaryWriter(str(runs / "stopped_session"))
    _steps(writer, range(5))
    writer._get_file_writer().add_event(
        Event(step=4, session_log=SessionLog(status=SessionLog.STOP))
    )
    writer.close()
    # closed, but nothing in the file says so: torch writes no ending at close()
    writer = tensorboard.SummaryWriter(str(runs / "plain"))
    _steps(writer, range(5))
    writer.close()

    result = lg.import_runs([runs])
    fates = {r.run: r.fate for r in result.runs}
    assert fates == {
        "closed": "finished",
        "complete": "finished",
        "stopped": "unknown",
        "stopped_session": "finished",
        "plain": "unknown",
    }  # and the hparams sub-folder is no run of its own
    assert lg.show("closed").fate_reason == "TensorBoard hparams session end STATUS_SUCCESS"
    assert "max_steps=20" in (lg.show("complete").fate_reason or "")
    assert "SessionLog STOP" in (lg.show("stopped_session").fate_reason or "")
    from tests.test_import import config_of

    assert config_of(lg, "closed") == {"lr": "0.01", "compile": "max-autotune"}
    assert metrics_of(lg, "closed")[(0, "hp/final_loss")] == pytest.approx(0.1)


# -- per-rank series ---------------------------------------------------------------------


def test_tensorboard_folders_and_tags_per_rank_land_as_ranks(lg: Any, tmp_path: Path) -> None:
    for rank in (0, 1):  # each rank writes its own folder
        writer = tensorboard.SummaryWriter(str(tmp_path / "runs" / "eager" / f"rank{rank}"))
        for step in range(6):
            writer.add_scalar("tokens_per_sec", 1000.0 * (rank + 1) + step, step)
        writer.close()
    writer = tensorboard.SummaryWriter(str(tmp_path / "runs" / "tagged"))
    for step in range(4):  # one writer, the rank in the tag
        for rank in (0, 1, 2):
            writer.add_scalar(f"rank{rank}/tokens_per_sec", 100.0 * rank + step, step)
            writer.add_scalar(f"train/loss/rank_{rank}", 1.0 + rank, step)
    writer.close()

    result = lg.import_runs([tmp_path / "runs"])
    assert sorted((r.run, r.ranks) for r in result.runs) == [
        ("eager", (0,)),
        ("eager", (1,)),
        ("tagged", (0, 1, 2)),
    ]
    eager = rank_steps(lg, "eager")
    assert sorted(eager) == [(r, s) for r in (0, 1) for s in range(6)]
    assert eager[(1, 5)]["throughput"] == 2005.0
    tagged = rank_steps(lg, "tagged")
    assert sorted(tagged) == [(r, s) for r in (0, 1, 2) for s in range(4)]
    assert tagged[(2, 3)]["throughput"] == 203.0 and tagged[(2, 3)]["loss"] == 3.0
    assert lg.import_runs([tmp_path / "runs"]).steps == 0


WANDB_SCRIPT = """
import os, sys
folder = sys.argv[1]
os.environ.update(
    WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=folder, WANDB_DISABLE_GIT="true",
    WANDB_CONFIG_DIR=os.path.join(folder, ".config"), WANDB_CONSOLE="off",
    WANDB_CACHE_DIR=os.path.join(folder, ".cache"),
)
import wandb

for rank in (0, 1):  # W&B's advice for DDP: a run per process, in one group
    run = wandb.init(project="bench", group="ddp", name=f"rank{rank}")
    for step in range(5):
        run.log({"tokens_per_sec": 100.0 * (rank + 1) + step}, step=step)
    run.finish()
"""


def test_wandb_runs_per_rank_land_as_ranks_of_their_group(lg: Any, tmp_path: Path) -> None:
    if importlib.util.find_spec("wandb") is None:
        pytest.skip("wandb is not installed")
    # in its own process: wandb keeps its first folder for the rest of a process
    done = subprocess.run(
        [sys.executable, "-c", WANDB_SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = lg.import_runs([tmp_path / "wandb"])
    assert sorted((r.run, r.ranks, r.fate) for r in result.runs) == [
        ("ddp", (0,), "finished"),
        ("ddp", (1,), "finished"),
    ]
    rows = rank_steps(lg, "ddp")
    assert sorted(rows) == [(r, s) for r in (0, 1) for s in range(5)]
    assert rows[(1, 4)]["throughput"] == 204.0


def test_an_exports_nested_rank_values_land_as_ranks(lg: Any, tmp_path: Path) -> None:
    export = tmp_path / "gathered.jsonl"
    export.write_text(
        "".join(
            json.dumps({"_step": s, "rank0": {"tps": 10.0 + s}, "rank1": {"tps": 20.0 + s}}) + "\n"
            for s in range(3)
        )
    )
    (imported,) = lg.import_runs([export]).runs
    assert imported.ranks == (0, 1)
    rows = rank_steps(lg, "gathered")
    assert {k: v["throughput"] for k, v in rows.items()} == {
        **{(0, s): 10.0 + s for s in range(3)},
        **{(1, s): 20.0 + s for s in range(3)},
    }


# -- a value logged since at an old step -------------------------------------------------


def test_a_second_import_picks_up_a_value_added_to_an_old_step(lg: Any, tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "eager"
    writer = tensorboard.SummaryWriter(str(folder))
    for step in range(10):
        writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    writer.flush()
    first = lg.import_runs([folder])
    assert (first.steps, first.filled) == (10, 0)
    assert all(r["throughput"] != r["throughput"] for r in steps_of(lg, "eager").values())

    for step in range(10):  # throughput, measured afterwards, logged at the old steps
        writer.add_scalar("tokens_per_sec", 5000.0 + step, step)
    writer.add_scalar("train/loss", 99.0, 3)  # a value rewritten: the stored one stays
    writer.close()
    second = lg.import_runs([folder])
    assert (second.steps, second.filled) == (0, 10)
    rows = steps_of(lg, "eager")
    assert [rows[s]["throughput"] for s in range(10)] == [5000.0 + s for s in range(10)]
    assert rows[3]["loss"] == pytest.approx(0.25)
    third = lg.import_runs([folder])
    assert (third.steps, third.filled, third.metrics) == (0, 0, 0)


@pytest.mark.filterwarnings(MLFLOW_SQLA)
def test_mlflow_values_logged_since_fill_old_steps(lg: Any, tmp_path: Path) -> None:
    store = tmp_path / "mlflow.db"
    client = _mlflow_client(f"sqlite:///{store}")
    run_id = client.create_run(client.create_experiment("bench"), run_name="eager").info.run_id
    for step in range(5):
        client.log_metric(run_id, "loss", 1.0 + step, step=step)
    lg.import_runs([store])
    for step in range(5):
        client.log_metric(run_id, "tokens_per_second", 700.0 + step, step=step)
        client.log_metric(run_id, "grad_norm", 0.5, step=step)  # a metric: a new row
    again = lg.import_runs([store])
    assert (again.steps, again.filled, again.metrics) == (0, 5, 5)
    rows = steps_of(lg, "eager")
    assert [(rows[s]["loss"], rows[s]["throughput"]) for s in range(5)] == [
        (1.0 + s, 700.0 + s) for s in range(5)
    ]


def test_the_cli_says_what_it_filled_and_which_ranks(tmp_path: Path, db_url: str) -> None:
    export = tmp_path / "eager_history.csv"
    export.write_text("_step,loss\n0,1.5\n1,1.25\n")
    assert run_cli("init").exit_code == 0
    assert run_cli("import", str(export)).exit_code == 0
    export.write_text("_step,loss,tps\n0,1.5,100\n1,1.25,101\n")
    done = run_cli("import", str(export))
    assert done.exit_code == 0, done.output
    assert "2 steps given values logged since" in done.output
    ranked = tmp_path / "ranked.jsonl"
    ranked.write_text(json.dumps({"_step": 0, "rank3": {"loss": 1.0}}) + "\n")
    assert "ranked (rank 3) (new run)" in run_cli("import", str(ranked)).output


@pytest.mark.filterwarnings(MLFLOW_SQLA)
def test_a_run_per_rank_ends_as_its_worst_rank(lg: Any, tmp_path: Path) -> None:
    store = tmp_path / "mlflow.db"
    client = _mlflow_client(f"sqlite:///{store}")
    experiment = client.create_experiment("bench")
    for rank, status in ((0, "FINISHED"), (1, "FAILED"), (2, "FINISHED")):
        run_id = client.create_run(experiment, run_name=f"eager-rank{rank}").info.run_id
        client.log_metric(run_id, "loss", 1.0 + rank, step=0)
        client.set_terminated(run_id, status)
    result = lg.import_runs([store])
    assert [(r.run, r.ranks, r.fate) for r in result.runs] == [
        ("eager", (0,), "crashed"),
        ("eager", (1,), "crashed"),
        ("eager", (2,), "crashed"),
    ]
    assert lg.show("eager").fate == "crashed"
    assert sorted(rank_steps(lg, "eager")) == [(0, 0), (1, 0), (2, 0)]


def test_what_is_a_rank_in_a_name() -> None:
    from ledger.importers.ranks import run_rank, scalar_rank

    assert [scalar_rank(n) for n in ("rank1/loss", "train/loss/rank_12", "a/rank-3/b")] == [
        ("loss", 1),
        ("train/loss", 12),
        ("a/b", 3),
    ]
    for plain in ("loss", "rank", "ranking/loss", "rank1x/loss", "rank0", "rank1/rank2/loss"):
        assert scalar_rank(plain) == (plain, None)  # no rank part, a bare one, or two
    assert [run_rank(n) for n in ("eager-rank1", "eager/rank_2", "rank3", "eager")] == [
        ("eager", 1),
        ("eager", 2),
        ("", 3),
        ("eager", None),
    ]
    assert run_rank("frank1") == ("frank1", None)
