"""`ledger import`: runs written by the real trackers (TensorBoard, MLflow on SQLite and as
mlruns/, trackio, W&B offline and exported), imported with every step and value intact as
the tracker itself reports them, twice without duplicates, and grown by new steps only."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger.errors import BadContentError, MissingExtraError, UsageError
from tests.helpers import run_cli

# MLflow's SQLite store runs on SQLAlchemy 2.1, which calls its `noload` strategy deprecated.
MLFLOW_SQLA = "ignore:The ``noload`` loader strategy is deprecated:DeprecationWarning"


def steps_of(lg: Any, run: str) -> dict[int, dict[str, float]]:
    frame = lg.steps_frame(run)
    return {int(r["step"]): dict(r) for r in frame.to_dict("records")}


def metrics_of(lg: Any, run: str) -> dict[tuple[int, str], float]:
    frame = lg.metrics_frame(run)
    return {(int(r["step"]), str(r["name"])): float(r["value"]) for r in frame.to_dict("records")}


def config_of(lg: Any, run: str) -> dict[str, str]:
    """The run's run_config rows with source 'import'."""
    from sqlalchemy import text

    with lg.engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT c.key, c.value FROM run_config c JOIN run r ON r.id = c.run_id "
                "WHERE r.name = :run AND c.source = 'import'"
            ),
            {"run": run},
        )
        return {str(k): str(v) for k, v in rows}


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


# -- TensorBoard -------------------------------------------------------------------------


def _tb_writer(folder: Path) -> Any:
    tensorboard = pytest.importorskip("torch.utils.tensorboard")
    return tensorboard.SummaryWriter(str(folder))


def _tb_truth(folder: Path) -> dict[str, dict[int, tuple[float, float]]]:
    """What TensorBoard's own reader reports: tag → step → (value, wall time)."""
    from tensorboard.backend.event_processing import event_accumulator as ea

    acc = ea.EventAccumulator(str(folder), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    return {
        tag: {e.step: (e.value, e.wall_time) for e in acc.Scalars(tag)}
        for tag in acc.Tags()["scalars"]
    }


def test_a_tensorboard_log_imports_every_step_once_and_grows(lg: Any, tmp_path: Path) -> None:
    folder = tmp_path / "runs" / "eager"
    writer = _tb_writer(folder)
    for step in range(30):
        writer.add_scalar("train/loss", 2.0 / (step + 1), step)
        writer.add_scalar("tokens_per_sec", 14000.0 + step, step)
        writer.add_scalar("lr", 1e-3 * (0.99**step), step)
    writer.flush()

    first = lg.import_runs([tmp_path / "runs"])
    (run,) = first.runs
    assert (run.run, run.source, run.run_created) == ("eager", "tensorboard", True)
    assert run.columns == {"train/loss": "loss", "tokens_per_sec": "throughput"}
    assert (run.steps, run.metrics) == (30, 30)
    truth = _tb_truth(folder)
    rows = steps_of(lg, "eager")
    assert sorted(rows) == sorted(truth["train/loss"]) == list(range(30))
    for step, row in rows.items():
        assert row["loss"] == truth["train/loss"][step][0]
        assert row["throughput"] == truth["tokens_per_sec"][step][0]
        assert row["wall_time"] == pytest.approx(
            max(truth["train/loss"][step][1], truth["tokens_per_sec"][step][1]), abs=1e-6
        )
    metrics = metrics_of(lg, "eager")
    assert {k: v for k, v in metrics.items()} == {(s, "lr"): v for s, (v, _) in truth["lr"].items()}
    detail = lg.show("eager")
    assert detail.throughput_unit == "tokens/s"
    (source,) = detail.log_files  # the folder it came from, its bytes, the points read
    assert source.path == str(folder.resolve())
    assert source.size == sum(p.stat().st_size for p in folder.iterdir())
    assert source.lines == 90

    again = lg.import_runs([tmp_path / "runs"])
    assert (again.steps, again.metrics, again.runs[0].run_created) == (0, 0, False)
    assert len(steps_of(lg, "eager")) == 30

    for step in range(30, 45):  # the run went on: only its new steps are added
        writer.add_scalar("train/loss", 2.0 / (step + 1), step)
        writer.add_scalar("tokens_per_sec", 14000.0 + step, step)
    writer.close()
    grown = lg.import_runs([folder])
    assert (grown.steps, grown.metrics) == (15, 0)
    assert sorted(steps_of(lg, "eager")) == list(range(45))
    assert grown.runs[0].last_step == 44


def test_one_run_per_folder_of_event_files(lg: Any, tmp_path: Path) -> None:
    for name, speed in (("a", 100.0), ("b", 90.0)):
        writer = _tb_writer(tmp_path / "logs" / name)
        for step in range(5):
            writer.add_scalar("throughput", speed, step)
        writer.close()
    result = lg.import_runs([tmp_path / "logs"])
    assert [r.run for r in result.runs] == ["a", "b"]
    assert {s: r["throughput"] for s, r in steps_of(lg, "b").items()} == dict.fromkeys(
        range(5), 90.0
    )
    # `throughput` says no unit: the run keeps none
    assert lg.show("a").throughput_unit is None


# -- MLflow ------------------------------------------------------------------------------


def _mlflow_client(uri: str) -> Any:
    mlflow = pytest.importorskip("mlflow")
    return mlflow.MlflowClient(tracking_uri=uri)


def _log_mlflow(client: Any, name: str, steps: range, *, finish: bool = True) -> str:
    experiment = client.get_experiment_by_name("bench")
    experiment_id = (
        experiment.experiment_id if experiment is not None else client.create_experiment("bench")
    )
    run = client.create_run(experiment_id, run_name=name)
    run_id = run.info.run_id
    client.log_param(run_id, "batch_size", "8")
    client.log_param(run_id, "compile", "max-autotune")
    _more_mlflow(client, run_id, steps)
    if finish:
        client.set_terminated(run_id, "FINISHED")
    return str(run_id)


def _more_mlflow(client: Any, run_id: str, steps: range) -> None:
    for step in steps:
        client.log_metric(run_id, "loss", 3.0 / (step + 1), step=step)
        client.log_metric(run_id, "tokens_per_second", 12000.0 + 7 * step, step=step)
        client.log_metric(run_id, "grad_norm", float("nan") if step == 3 else 0.5, step=step)


def _check_mlflow(lg: Any, client: Any, run_id: str, name: str) -> None:
    rows = steps_of(lg, name)
    for key, column in (("loss", "loss"), ("tokens_per_second", "throughput")):
        history = client.get_metric_history(run_id, key)
        assert sorted(rows) == sorted(m.step for m in history)
        for m in history:
            assert rows[m.step][column] == m.value
            assert rows[m.step]["wall_time"] >= m.timestamp / 1000.0 - 1e-3
    metrics = metrics_of(lg, name)
    for m in client.get_metric_history(run_id, "grad_norm"):
        assert same(metrics[(m.step, "grad_norm")], m.value)
    params = client.get_run(run_id).data.params
    assert {k: config_of(lg, name)[k] for k in params} == params


@pytest.mark.filterwarnings(MLFLOW_SQLA)
def test_an_mlflow_sqlite_store_imports_runs_metrics_and_params(lg: Any, tmp_path: Path) -> None:
    store = tmp_path / "mlflow.db"
    client = _mlflow_client(f"sqlite:///{store}")
    first_id = _log_mlflow(client, "eager", range(12))
    second_id = _log_mlflow(client, "compiled", range(8), finish=False)

    result = lg.import_runs([store])
    assert [(r.run, r.steps, r.metrics, r.config) for r in result.runs] == [
        ("eager", 12, 12, 2),
        ("compiled", 8, 8, 2),
    ]
    assert [r.fate for r in result.runs] == ["finished", "running"]
    _check_mlflow(lg, client, first_id, "eager")
    _check_mlflow(lg, client, second_id, "compiled")

    assert lg.import_runs([store]).steps == 0
    _more_mlflow(client, second_id, range(8, 20))
    client.set_terminated(second_id, "FAILED")
    grown = lg.import_runs([store])
    assert [(r.run, r.steps, r.metrics) for r in grown.runs] == [
        ("eager", 0, 0),
        ("compiled", 12, 12),
    ]
    assert grown.runs[1].fate == "crashed"
    _check_mlflow(lg, client, second_id, "compiled")


def test_an_mlflow_file_store_imports_the_same(
    lg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps it for old users
    root = tmp_path / "mlruns"
    client = _mlflow_client(root.as_uri())
    run_id = _log_mlflow(client, "eager", range(10))
    result = lg.import_runs([root])
    assert [(r.run, r.steps, r.metrics, r.fate) for r in result.runs] == [
        ("eager", 10, 10, "finished")
    ]
    _check_mlflow(lg, client, run_id, "eager")
    assert lg.import_runs([root]).steps == 0


# -- trackio -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trackio_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """trackio reads its folder once, at import: one folder for this module's projects."""
    folder = tmp_path_factory.mktemp("trackio")
    before = os.environ.get("TRACKIO_DIR")
    os.environ["TRACKIO_DIR"] = str(folder)
    yield folder
    if before is None:
        os.environ.pop("TRACKIO_DIR", None)
    else:
        os.environ["TRACKIO_DIR"] = before


def test_a_trackio_project_imports_each_run(lg: Any, trackio_dir: Path) -> None:
    trackio = pytest.importorskip("trackio")
    from trackio.sqlite_storage import SQLiteStorage

    if Path(str(SQLiteStorage.get_project_db_path("p"))).parent != trackio_dir:
        pytest.skip("trackio was imported before this module set its folder")
    for name, speed in (("eager", 1000.0), ("compiled", 1200.0)):
        trackio.init(project="bench", name=name, config={"lr": 0.01, "layers": 2})
        for step in range(6):
            trackio.log({"train/loss": 1.0 / (step + 1), "tps": speed + step}, step=step)
        trackio.finish()
    db = SQLiteStorage.get_project_db_path("bench")
    result = lg.import_runs([db])
    assert [(r.run, r.steps) for r in result.runs] == [("eager", 6), ("compiled", 6)]
    for name in ("eager", "compiled"):
        logs = SQLiteStorage.get_logs("bench", name)
        rows = steps_of(lg, name)
        assert sorted(rows) == [entry["step"] for entry in logs]
        for entry in logs:
            assert rows[entry["step"]]["loss"] == entry["train/loss"]
            assert rows[entry["step"]]["throughput"] == entry["tps"]
        told = SQLiteStorage.get_run_config("bench", name) or {}
        assert config_of(lg, name) == {
            k: json.dumps(v) for k, v in told.items() if not k.startswith("_")
        }
    assert lg.import_runs([db]).steps == 0


# -- Weights & Biases --------------------------------------------------------------------


@pytest.fixture
def wandb_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    wandb = pytest.importorskip("wandb")
    for name, value in {
        "WANDB_MODE": "offline",
        "WANDB_SILENT": "true",
        "WANDB_DIR": str(tmp_path),
        "WANDB_CONFIG_DIR": str(tmp_path / ".config"),
        "WANDB_CACHE_DIR": str(tmp_path / ".cache"),
        "WANDB_DISABLE_GIT": "true",
        "WANDB_CONSOLE": "off",
    }.items():
        monkeypatch.setenv(name, value)
    return wandb


def test_a_wandb_offline_run_imports_history_and_config(
    lg: Any, tmp_path: Path, wandb_offline: Any
) -> None:
    logged: dict[int, dict[str, float]] = {}
    run = wandb_offline.init(project="bench", name="eager", config={"lr": 3e-4, "seq": 2048})
    for step in range(20):
        values = {"loss": 5.0 / (step + 1), "tokens_per_sec": 9000.0 + step / 3, "lr": 1e-4}
        run.log(values, step=step)
        logged[step] = values
    run.finish()

    result = lg.import_runs([tmp_path / "wandb"])
    (imported,) = result.runs
    assert (imported.run, imported.steps, imported.metrics) == ("eager", 20, 20)
    assert imported.fate == "finished"
    rows = steps_of(lg, "eager")
    assert sorted(rows) == sorted(logged)
    for step, values in logged.items():
        assert rows[step]["loss"] == values["loss"]
        assert rows[step]["throughput"] == values["tokens_per_sec"]
    assert config_of(lg, "eager") == {"lr": "0.0003", "seq": "2048"}
    assert lg.import_runs([tmp_path / "wandb"]).steps == 0


def test_an_exported_wandb_history_csv_and_json_lines(lg: Any, tmp_path: Path) -> None:
    csv_file = tmp_path / "eager_history.csv"
    lines = ["_step,_timestamp,loss,tokens_per_sec,eval/acc"]
    lines += [
        f"{s},{1.7e9 + s},{1 / (s + 1)!r},{1000 + s},{'' if s % 2 else 0.5}" for s in range(8)
    ]
    csv_file.write_text("\n".join(lines) + "\n")
    (tmp_path / "eager_config.json").write_text(json.dumps({"lr": {"value": 0.1}}))
    jsonl = tmp_path / "compiled.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps({"_step": s, "train": {"loss": 0.5}, "tps": 1100.0}) + "\n" for s in range(4)
        )
    )
    result = lg.import_runs([csv_file, jsonl], names=["train.loss=loss"])
    assert [(r.run, r.steps, r.metrics) for r in result.runs] == [
        ("eager_history", 8, 4),  # named after its file, as ingest names runs
        ("compiled", 4, 0),
    ]
    rows = steps_of(lg, "eager_history")
    assert [rows[s]["loss"] for s in range(8)] == [1 / (s + 1) for s in range(8)]
    assert [rows[s]["wall_time"] for s in range(8)] == [1.7e9 + s for s in range(8)]
    assert metrics_of(lg, "eager_history") == {(s, "eval/acc"): 0.5 for s in range(0, 8, 2)}
    assert config_of(lg, "eager_history") == {"lr": "0.1"}  # eager_config.json beside it
    assert {s: r["loss"] for s, r in steps_of(lg, "compiled").items()} == dict.fromkeys(
        range(4), 0.5
    )
    csv_file.write_text("\n".join([*lines, f"8,{1.7e9 + 8},0.1,1008,"]) + "\n")
    assert lg.import_runs([csv_file]).steps == 1


# -- the name map, errors, the CLI -------------------------------------------------------


def test_map_overrides_the_default_table(lg: Any, tmp_path: Path) -> None:
    export = tmp_path / "r.jsonl"
    export.write_text(
        "".join(
            json.dumps({"_step": s, "loss": 1.0, "val_loss": 2.0, "sps": 64.0}) + "\n"
            for s in range(3)
        )
    )
    result = lg.import_runs([export], names=["val_loss=loss", "sps=throughput:samples/s"])
    assert result.runs[0].columns == {"val_loss": "loss", "sps": "throughput"}
    assert {r["loss"] for r in steps_of(lg, "r").values()} == {2.0}
    assert {k[1] for k in metrics_of(lg, "r")} == {"loss"}  # the name that lost stays a metric
    assert lg.show("r").throughput_unit == "samples/s"
    other = tmp_path / "s.jsonl"
    other.write_text(json.dumps({"_step": 0, "loss": 1.0}) + "\n")
    assert lg.import_runs([other], names=["loss=metric"]).runs[0].columns == {}
    with pytest.raises(UsageError, match="no step column 'speed'"):
        lg.import_runs([other], names=["loss=speed"])
    with pytest.raises(UsageError, match="SOURCE=COLUMN"):
        lg.import_runs([other], names=["loss"])


def test_what_is_not_a_tracker_is_refused_in_one_line(lg: Any, tmp_path: Path) -> None:
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(BadContentError, match="none of what ledger imports"):
        lg.import_runs([text])
    export = tmp_path / "a.jsonl"
    export.write_text(json.dumps({"_step": 0, "loss": 1.0}) + "\n")
    other = tmp_path / "b.jsonl"
    other.write_text(json.dumps({"_step": 0, "loss": 1.0}) + "\n")
    with pytest.raises(UsageError, match="hold 2 runs"):
        lg.import_runs([export, other], "one")


@pytest.mark.parametrize(("library", "extra"), [("tensorboard", "tensorboard"), ("wandb", "wandb")])
def test_a_missing_extra_is_named(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, library: str, extra: str
) -> None:
    import builtins

    from ledger import importers

    real = builtins.__import__

    def without(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == library or name.startswith(library + "."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    if library == "tensorboard":
        (tmp_path / "events.out.tfevents.1.host").write_bytes(b"")
    else:
        (tmp_path / "run-abc.wandb").write_bytes(b"")
    monkeypatch.setattr(builtins, "__import__", without)
    with pytest.raises(MissingExtraError, match=rf"pip install 'ledger\[{extra}\]'") as caught:
        importers.read(tmp_path)
    assert "\n" not in str(caught.value)


def test_the_cli_imports_and_prints_json(tmp_path: Path, db_url: str) -> None:
    export = tmp_path / "eager_history.csv"
    export.write_text("_step,loss,tps\n0,1.5,100\n1,1.25,101\n")
    assert run_cli("init").exit_code == 0
    result = run_cli("import", str(export), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert (data["steps"], data["runs"][0]["run"]) == (2, "eager_history")
    assert data["runs"][0]["columns"] == {"loss": "loss", "tps": "throughput"}
    text = run_cli("import", str(export))
    assert "nothing new" in text.output
    bad = run_cli("import", str(export), "--map", "tps")
    assert bad.exit_code == 2
    assert bad.output.strip().startswith("Error:") and len(bad.output.strip().splitlines()) == 1


# -- imported runs are runs like any other -----------------------------------------------


def test_compare_and_watch_read_imported_runs(
    lg: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    from ledger.watch import watch

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = _mlflow_client((tmp_path / "mlruns").as_uri())
    experiment_id = client.create_experiment("bench")
    noise = random.Random(7)
    for name, speed in (("eager", 14000.0), ("slower", 12600.0)):
        run_id = client.create_run(experiment_id, run_name=name).info.run_id
        client.log_param(run_id, "token_budget", "65536" if name == "eager" else "49152")
        for step in range(300):
            value = speed * (1 + noise.gauss(0, 0.01))
            client.log_metric(run_id, "tokens_per_sec", value, timestamp=step * 100, step=step)
        client.set_terminated(run_id, "FINISHED")
    lg.import_runs([tmp_path / "mlruns"])

    report = lg.compare(["eager", "slower"])
    (comparison,) = report.comparisons
    assert comparison.delta_pct == pytest.approx(-10.0, abs=1.5)
    assert comparison.verdict == "regression"

    updates = list(watch(lg, "slower", against="eager", timeout=30.0, interval=0.01))
    result = updates[-1].result
    assert result is not None
    assert (result.outcome, result.fate) == ("regression", "finished")
    assert result.steps >= 299  # every imported step reached the monitor (the first opens it)

    # why reads imported runs too: the difference as compare says it, and the param that
    # differs (imported into run_config) as its first finding
    found = lg.why("slower", against="eager")
    assert found.verdict == "regression" and found.delta_pct == pytest.approx(-10.0, abs=1.5)
    assert found.top is not None and found.top.kind == "config_change"
    assert "token_budget" in found.top.claim


def test_the_documented_name_table_is_the_one_used() -> None:
    import re

    from ledger.importers.names import DEFAULT_NAMES

    page = (Path(__file__).parent.parent / "docs" / "import.md").read_text(encoding="utf-8")
    section = page.split("### The default name table", 1)[1].split("\n\n", 2)[1]
    documented: dict[str, str] = {}
    for line in section.splitlines()[2:]:
        names, column = line.strip("|").split("|")
        target = re.findall(r"`([^`]+)`", column)[0]
        documented.update(dict.fromkeys(re.findall(r"`([^`]+)`", names), target))
    assert documented == {name: column for name, (column, _) in DEFAULT_NAMES.items()}
