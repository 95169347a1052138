"""The Ledger API: hypotheses, fixes, deploys, runs, timeline — on the pass's backend."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

import ledger
from ledger.errors import ConflictError, InputFileError, NotFoundError, UsageError
from ledger.proc import OUTPUT_TAIL_BYTES


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def train(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("cache = GpuBufferCache(persistent=cfg.compile)\n")
    return path


def test_hypotheses_add_resolve_list(lg) -> None:
    first = lg.add_hypothesis("  recompiles on mask closures  ")
    child = lg.add_hypothesis("closures capture the step counter", parent=first.id)
    assert first.text == "recompiles on mask closures"
    assert (first.status, child.parent_id) == ("open", first.id)
    resolved = lg.resolve_hypothesis(first.id, "confirmed", note="31 % faster")
    assert resolved.status == "confirmed" and resolved.resolved_at is not None
    assert [h.id for h in lg.hypotheses(status="open")] == [child.id]
    assert [h.id for h in lg.hypotheses()] == [first.id, child.id]


def test_hypothesis_errors_name_what_exists(lg) -> None:
    h = lg.add_hypothesis("one")
    with pytest.raises(NotFoundError, match=rf"no hypothesis 99.*known: {h.id}"):
        lg.resolve_hypothesis(99, "refuted")
    with pytest.raises(UsageError):
        lg.resolve_hypothesis(h.id, "maybe")
    with pytest.raises(UsageError):
        lg.add_hypothesis("   ")
    with pytest.raises(NotFoundError):
        lg.add_hypothesis("orphan", parent=42)


def test_record_fix_links_hypothesis_patch_run_and_hashes_files(lg, train: Path) -> None:
    fix = lg.record_fix(
        "torch.compile recompiles",
        "gate the cache",
        diff="--- a\n+++ b\n",
        files=[train],
        run="eager_dc",
    )
    assert fix.hypothesis_created and fix.run == "eager_dc"
    assert [(f.path, f.sha256) for f in fix.files] == [(str(train), sha(train))]
    detail = lg.show("eager_dc")
    assert detail.hypothesis.text == "torch.compile recompiles"
    assert detail.patch.id == fix.patch_id and detail.patch.diff == "--- a\n+++ b\n"
    again = lg.record_fix(str(fix.hypothesis_id), "second try", run="eager_dc2")
    assert not again.hypothesis_created and again.hypothesis_id == fix.hypothesis_id


def test_record_fix_is_one_transaction(lg, train: Path) -> None:
    lg.record_fix("first idea", "patch one", run="r1")
    before = lg.timeline()
    with pytest.raises(ConflictError, match="already tests patch"):
        lg.record_fix("second idea", "patch two", files=[train], run="r1")
    # The new hypothesis and patch of the refused call were rolled back with it.
    assert lg.timeline() == before
    with pytest.raises(NotFoundError, match="no hypothesis 7"):
        lg.record_fix(7, "no such hypothesis")
    with pytest.raises(InputFileError, match="no such file"):
        lg.record_fix("x", "y", files=[train.parent / "missing.py"])
    assert lg.timeline() == before


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def test_record_fix_from_git(lg, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "t")
    (repo / "src" / "train.py").write_text("a = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    (repo / "src" / "train.py").write_text("a = 2\n")
    fix = lg.record_fix("h", "bump a", git_dir=repo / "src", run="r")
    patch = lg.patch(fix.patch_id)
    assert patch.git_commit == _git(repo, "rev-parse", "HEAD").strip()
    assert "-a = 1" in patch.diff and "+a = 2" in patch.diff
    assert [(f.path, f.sha256) for f in patch.files] == [
        ("src/train.py", sha(repo / "src/train.py"))
    ]
    with pytest.raises(InputFileError, match="not a git repository"):
        lg.record_fix("h", "s", git_dir=tmp_path)


def test_deploy_runs_without_shell_and_keeps_the_tail(lg) -> None:
    lg.record_fix("h", "s", run="r")
    big = f"import sys; sys.stdout.write('x' * {OUTPUT_TAIL_BYTES * 3} + 'THE END'); sys.exit(3)"
    step = lg.deploy("r", "compile", [sys.executable, "-c", big])
    assert step.exit_code == 3 and not step.timed_out
    assert step.output.endswith("THE END") and len(step.output) == OUTPUT_TAIL_BYTES
    assert step.output_bytes == OUTPUT_TAIL_BYTES * 3 + len("THE END")
    literal = lg.deploy("r", "echo", ["echo", "$HOME", "; ls"])  # no shell: printed as is
    assert literal.output == "$HOME ; ls\n"


def test_deploy_failures_are_still_rows(lg) -> None:
    lg.record_fix("h", "s", run="r")
    missing = lg.deploy("r", "copy", ["definitely-not-a-command-xyz"])
    assert missing.exit_code == 127 and "command not found" in missing.output
    slow = lg.deploy(
        "r", "relaunch", [sys.executable, "-c", "import time; time.sleep(30)"], timeout=0.5
    )
    assert slow.timed_out and slow.exit_code == 124
    assert [s.name for s in lg.deploy_steps("r")] == ["copy", "relaunch"]
    with pytest.raises(NotFoundError, match="did you mean 'r'"):
        lg.deploy("rr", "copy", ["true"])
    with pytest.raises(UsageError):
        lg.deploy("r", "copy", [])


def test_deploy_detects_drift(lg, tmp_path: Path, train: Path) -> None:
    lg.record_fix("h", "s", files=[train], run="r")
    build = tmp_path / "build"
    build.mkdir()
    stale = build / "train.py"
    stale.write_text("cache = GpuBufferCache(persistent=True)\n")
    drifted = lg.deploy("r", "copy", ["true"], artifact=stale)
    assert drifted.drift is True and drifted.held and drifted.exit_code is None  # not run
    assert drifted.artifact_sha256 == sha(stale) and drifted.expected_sha256 == sha(train)
    assert lg.run_summary("r").drift is True
    stale.write_bytes(train.read_bytes())
    fresh = lg.deploy("r", "copy", ["true"], artifact=stale)
    assert fresh.drift is False and fresh.expected_sha256 == sha(train) and not fresh.held
    other = tmp_path / "model.py"
    other.write_text("x")
    assert lg.deploy("r", "copy", ["true"], artifact=other).drift is None  # no file of that name
    lg.ensure_run("unpatched")
    assert lg.deploy("unpatched", "copy", ["true"], artifact=train).drift is None
    assert lg.run_summary("r").drift is False  # the patched file shipped after the stale one


def test_record_only_deploy(lg, train: Path) -> None:
    lg.record_fix("h", "s", files=[train], run="r")
    step = lg.record_deploy("r", "push", ["pct", "push", "200"], exit_code=0, artifact=train)
    assert step.recorded_only and step.exit_code == 0 and step.drift is False


def test_runs_show_and_timeline(lg, train: Path) -> None:
    fix = lg.record_fix("h", "gate the cache", files=[train], run="eager_dc")
    lg.deploy("eager_dc", "copy", ["true"], artifact=train)
    lg.add_steps(
        "eager_dc",
        [{"step": s, "rank": r, "throughput": 14000.0} for s in range(5) for r in range(2)],
    )
    [summary] = lg.runs()
    assert (summary.run, summary.steps, summary.ranks, summary.last_step) == ("eager_dc", 5, 2, 4)
    assert (summary.hypothesis_id, summary.patch_id, summary.deploy_steps) == (
        fix.hypothesis_id,
        fix.patch_id,
        1,
    )
    kinds = [e.kind for e in lg.timeline()]
    assert kinds == ["hypothesis", "patch", "run", "deploy"]
    detail = lg.show("eager_dc").to_dict()
    assert detail["deploy_steps"][0]["drift"] is False and detail["patch"]["files"][0][
        "path"
    ] == str(train)


def test_read_only_open_refuses_a_missing_ledger(tmp_path: Path) -> None:
    from ledger.errors import LedgerNotFoundError

    with pytest.raises(LedgerNotFoundError, match="ledger init"):
        ledger.open(tmp_path / "nowhere" / "ledger.db", create=False)
    assert not (tmp_path / "nowhere").exists()


def test_frames(lg) -> None:
    lg.add_steps("r", [{"step": 1, "throughput": 10.0, "grad_norm": 0.5}], throughput_unit="tok/s")
    runs = lg.runs_frame()
    assert runs.loc[0, "run"] == "r" and runs.loc[0, "steps"] == 1
    metrics = lg.metrics_frame("r")
    assert metrics.to_dict("records") == [{"rank": 0, "step": 1, "name": "grad_norm", "value": 0.5}]
    with pytest.raises(UsageError, match="no step column"):
        lg.steps_frame("r", ["nope"])


def test_investigations_are_separate(db_url: str) -> None:
    with ledger.open(db_url) as a, ledger.open(db_url, investigation="other") as b:
        a.add_hypothesis("in default")
        b.add_steps("shared_name", [{"step": 1}])
        a.add_steps("shared_name", [{"step": 1}, {"step": 2}])
        assert [h.text for h in b.hypotheses()] == []
        assert b.run_summary("shared_name").steps == 1 and a.run_summary("shared_name").steps == 2


def test_many_writers_creating_the_same_run_at_once(db_url: str) -> None:
    """Eight ranks of one launch create their run at the same instant: all succeed, one row."""
    import threading

    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def rank() -> None:
        try:
            with ledger.open(db_url, investigation="race") as lg:
                barrier.wait()
                lg.ensure_run("same_run")
        except BaseException as exc:  # collected, so the test reports every failure
            errors.append(exc)

    threads = [threading.Thread(target=rank) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with ledger.open(db_url, investigation="race") as lg:
        assert lg.run_names() == ["same_run"]
