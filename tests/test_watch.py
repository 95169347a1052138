"""`ledger watch` against a stand-in trainer that writes a realistic log at a real pace:
every outcome, through every source (a log file, a command's output, a StepMeter's rows),
with the exit status a script can act on and the decision kept in the ledger."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import run_cli, run_json

import ledger

# Fast enough for a test, slow enough that watch sees the run arrive step by step.
PACE = ["--step-time", "0.003", "--load-time", "0.3", "--noise", "0.01"]
TRAINER = [sys.executable, "-m", "ledger.demo.trainer"]


def _ledger(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def _trainer(log: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*TRAINER, "--log", str(log), *PACE, *args])


@pytest.fixture
def box(db_url: str, tmp_path: Path) -> Path:
    run_json("init", "--baseline", "14200", "--unit", "tok/s")
    return tmp_path


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def test_a_slower_relaunch_is_a_regression_decided_early(box: Path) -> None:
    log = box / "train_slow.log"
    trainer = _trainer(log, "--level", "10650", "--steps", "5000", "--ending", "ok")
    try:
        done = _ledger("watch", "slow", "--log", str(log), "--interval", "0.1", "--json")
    finally:
        _stop(trainer)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "regression" and result["fate"] == "running"
    assert 70 < result["pct_of_reference"] < 80  # 10.65K against 14.2K is 75 %
    # decided within 150 steady steps (more may have arrived in the look that decided)
    assert result["decided_at_step"] - result["steady_from_step"] <= 150
    assert result["reference"] == {"kind": "baseline", "value": 14200.0, "run": None}
    assert "new run 'slow'" in done.stderr  # the run was made, and said so, once
    with ledger.open() as lg:
        (kept,) = [c for c in lg.comparisons() if c.kind == "watch"]
        assert (kept.b, kept.a, kept.verdict) == ("slow", None, "regression")
        assert kept.reference_value == 14200.0 and kept.decided_at_step == result["decided_at_step"]
        stored = lg.run_summary("slow").steps
    again = run_json("ingest", str(log))  # what watch read is stored as ingest stores it
    assert again["run"] == "slow" and lg is not None
    with ledger.open() as lg:
        assert lg.run_summary("slow").steps >= stored  # the trainer went on a little


def test_back_at_the_baseline_is_same(box: Path) -> None:
    log = box / "train_back.log"
    trainer = _trainer(log, "--level", "14200", "--steps", "8000", "--ending", "ok")
    try:
        done = _ledger("watch", "back", "--log", str(log), "--interval", "0.1")
    finally:
        _stop(trainer)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "back: SAME" in done.stdout


@pytest.mark.parametrize(("ending", "fate"), [("oom", "oom"), ("nccl", "nccl")])
def test_a_run_that_dies_fails_at_once_with_the_line_that_shows_it(
    box: Path, ending: str, fate: str
) -> None:
    log = box / f"train_{ending}.log"
    trainer = _trainer(log, "--ending", ending, "--end-at", "60", "--steps", "5000")
    done = _ledger("watch", ending, "--log", str(log), "--interval", "0.1", "--json")
    ended = time.time()
    trainer.wait()
    assert done.returncode == 3, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "failed" and result["fate"] == fate
    said = {"oom": "CUDA out of memory", "nccl": "ALLREDUCE timed out"}
    assert said[ending] in result["reason"]
    # At once: counted from the dying line's write, not from two interpreters' start-up (30 s
    # on a loaded machine), and far inside the 5 minutes a silent log takes to be a stall.
    assert ended - log.stat().st_mtime < 60


def test_silence_is_a_stall_stored_as_fate_and_event(box: Path) -> None:
    log = box / "train_hung.log"
    trainer = _trainer(log, "--ending", "stall", "--end-at", "120", "--steps", "5000")
    try:
        # 5 s of silence: a loaded machine can pause the trainer for a second or two before
        # its stall, and that pause is not the stall this test means.
        done = _ledger(
            "watch", "hung", "--log", str(log), "--interval", "0.1", "--stall-after", "5"
        )
    finally:
        _stop(trainer)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "hung: STALLED" in done.stdout and "nothing new for" in done.stdout
    with ledger.open() as lg:
        detail = lg.show("hung")
        assert detail.fate == "stalled"
        assert detail.event_counts.get("stall") == 1 and detail.last_step == 119
    # the step it names is the last step stored, the number `show` says (not one before it)
    assert "(last step 119)" in done.stdout and "(last step 118)" not in done.stdout


def test_the_command_source_reads_its_standard_output(box: Path) -> None:
    # A trainer: watch says the decision at once, and stays until the trainer's own end.
    command = [*TRAINER, *PACE, "--level", "10650", "--steps", "900", "--ending", "finish"]
    done = _ledger("watch", "piped", "--interval", "0.1", "--json", "--", *command)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "regression" and result["role"] == "trainer"
    assert result["decided_at_step"] < 900  # decided long before the end…
    assert result["exit_code"] == 0 and result["fate"] == "finished"  # …which it waited for
    assert "PIPED: REGRESSION".lower() in done.stderr.lower()  # said at the decision
    with ledger.open() as lg:
        detail = lg.show("piped")
        (log,) = detail.log_files
        assert "streams" in log.path
        assert detail.steps == 900 and detail.last_step == 900  # the whole output is stored
        assert detail.fate == "finished" and detail.launches[-1].exit_code == 0


def test_a_command_that_ends_first_is_undecided(box: Path) -> None:
    command = [*TRAINER, *PACE, "--steps", "20", "--ending", "finish"]
    done = _ledger("watch", "short", "--interval", "0.1", "--", *command)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "before the numbers could tell" in done.stdout


def test_a_timeout_is_undecided(box: Path) -> None:
    log = box / "train_slowpoke.log"
    trainer = _trainer(log, "--ending", "ok", "--load-time", "30")  # still loading at the end
    try:
        done = _ledger("watch", "slowpoke", "--log", str(log), "--interval", "0.1",
                       "--timeout", "2", "--json")  # fmt: skip
    finally:
        _stop(trainer)
    assert done.returncode == 5, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "undecided" and "within 2 s" in result["reason"]


def test_a_log_that_does_not_exist_yet_is_waited_for(box: Path) -> None:
    log = box / "train_later.log"
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    watcher = subprocess.Popen(
        [sys.executable, "-c", code, "watch", "later", "--log", str(log), "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert watcher.stdout is not None
    first = watcher.stdout.readline()  # it says it waits before the log exists
    assert first.startswith("later: waiting for training output") and not log.exists()
    _trainer(log, "--ending", "oom", "--end-at", "40").wait()
    rest, _ = watcher.communicate(timeout=120)
    assert watcher.returncode == 3 and "later: FAILED" in rest


METER = textwrap.dedent(
    """
    import sys, time
    from ledger.hook import StepMeter
    meter = StepMeter(sys.argv[2], db=sys.argv[1], flush_interval=0.2, cuda=False)
    for i in range(4000):
        with meter.step(tokens=int(sys.argv[3])):
            time.sleep(0.004)
    meter.close()
    """
)


def test_rows_written_by_a_step_meter_elsewhere(box: Path, db_url: str) -> None:
    """No log at all: a StepMeter in another process writes rows, watch reads them."""
    trainer = subprocess.Popen([sys.executable, "-c", METER, db_url, "metered", "40"])
    try:
        # 40 tokens in ~4 ms is ~10K tok/s: against a 14.2K baseline, a regression
        done = _ledger("watch", "metered", "--interval", "0.2", "--json")
    finally:
        _stop(trainer)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "regression" and result["steps"] > 20


def test_against_another_run(box: Path) -> None:
    reference = box / "train_ref.log"
    _trainer(reference, "--level", "14000", "--steps", "600", "--step-time", "0.0005").wait()
    run_json("ingest", str(reference))
    log = box / "train_cand.log"
    trainer = _trainer(log, "--level", "10000", "--steps", "5000", "--ending", "ok")
    try:
        done = _ledger("watch", "cand", "--log", str(log), "--against", "ref", "--json",
                       "--interval", "0.1")  # fmt: skip
    finally:
        _stop(trainer)
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["reference"]["kind"] == "run" and result["reference"]["run"] == "ref"
    with ledger.open() as lg:
        (kept,) = [c for c in lg.comparisons() if c.kind == "watch"]
        assert (kept.a, kept.b) == ("ref", "cand")


def test_notify_runs_once_with_the_json_and_ctrl_c_keeps_what_was_read(box: Path) -> None:
    log = box / "train_told.log"
    got = box / "notified.json"
    trainer = _trainer(log, "--ending", "oom", "--end-at", "50")
    done = _ledger("watch", "told", "--log", str(log), "--interval", "0.1",
                   "--notify", f"cat > {got}")  # fmt: skip
    trainer.wait()
    assert done.returncode == 3
    assert json.loads(got.read_text())["outcome"] == "failed"

    log = box / "train_cut.log"
    # 40 steps at the baseline, then silence: never enough to say SAME (that takes 100
    # steady steps) nor a stall (5 minutes), so Ctrl-C comes first however late a loaded
    # machine sends it (a trainer that went on could be judged SAME before).
    trainer = _trainer(log, "--level", "14200", "--steps", "100000", "--ending", "stall",
                       "--end-at", "40", "--step-time", "0.01")  # fmt: skip
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    watcher = subprocess.Popen(
        [sys.executable, "-c", code, "watch", "cut", "--log", str(log), "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for _ in range(600):  # until watch is up and has stored steps (a loaded machine is slow)
            time.sleep(0.1)
            with ledger.open() as lg:
                if "cut" in lg.run_names() and lg.run_summary("cut").steps > 10:
                    break
        watcher.send_signal(signal.SIGINT)
        _, err = watcher.communicate(timeout=120)
    finally:
        _stop(trainer)
        if watcher.poll() is None:  # never left running: its pipes, collected later, fail
            watcher.kill()  # another test
            watcher.communicate()
    assert watcher.returncode == 130 and err.strip().splitlines()[-1].startswith("Error: interr")
    with ledger.open() as lg:
        assert lg.run_summary("cut").steps > 10  # what it read before Ctrl-C is stored


def test_a_watch_needs_a_reference(db_url: str, tmp_path: Path) -> None:
    run_json("init")
    result = run_cli("watch", "x", "--log", str(tmp_path / "x.log"))
    assert result.exit_code == 2 and "set a baseline" in result.stderr
    both = run_cli("watch", "x", "--log", "a.log", "--", "tail", "-f", "a.log")
    assert both.exit_code == 2


@pytest.mark.skipif(os.name != "posix", reason="a pty is POSIX")
def test_on_a_terminal_the_status_is_one_line_redrawn(box: Path) -> None:
    import pty

    log = box / "train_tty.log"
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    main, child = pty.openpty()
    watcher = subprocess.Popen(
        [sys.executable, "-c", code, "watch", "tty", "--log", str(log), "--interval", "0.05"],
        stdout=child, stderr=child, close_fds=True,
    )  # fmt: skip
    os.close(child)
    # The relaunch starts once the watcher is up and says so (waiting for its log): on a
    # loaded machine the watcher's start-up could otherwise outlast the whole run, leaving
    # nothing to redraw between its first line and its last.
    seen = os.read(main, 4096)
    trainer = _trainer(
        log, "--ending", "oom", "--end-at", "150", "--load-time", "1", "--step-time", "0.01"
    )
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    watcher.wait(timeout=60)
    trainer.wait()
    assert watcher.returncode == 3
    text = seen.decode(errors="replace")
    assert text.count("\r") > 3 and "\a" in text  # redrawn in place; a bell at the end
    assert "tty: FAILED" in text


def test_the_timeline_shows_what_watch_decided(box: Path) -> None:
    log = box / "train_told.log"
    trainer = _trainer(log, "--level", "10650", "--steps", "5000", "--ending", "ok")
    try:
        assert _ledger("watch", "told", "--log", str(log), "--interval", "0.1").returncode == 1
    finally:
        _stop(trainer)
    said = [e for e in run_json("timeline") if e["kind"] == "comparison"]
    assert len(said) == 1 and said[0]["summary"].startswith("watch: told regression against")


def test_identical_outputs_of_two_launches_are_two_launches(box: Path) -> None:
    oom = box / "oom.log"
    # one run, well past the 4 KiB a copy is told by (the same run four times in one log
    # would be four runs: four launches a watch)
    lines = [f"step {i} | loss 2.0 | tok/s {14000 + i % 7}\n" for i in range(1, 480)]
    lines += [
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.50 GiB. GPU 3 has a "
        "total capacity of 79.19 GiB of which 1.21 GiB is free.\n"
    ]
    oom.write_text("".join(lines))
    for run in ("a1", "a2", "a1"):  # a second run, then a second launch of the first
        done = _ledger("watch", run, "--interval", "0.1", "--", "cat", str(oom))
        assert done.returncode == 3, done.stdout + done.stderr  # failed: never refused
    with ledger.open() as lg:
        assert lg.run_summary("a2").fate == "oom"
        assert [x.fate for x in lg.launches("a1")] == ["oom", "oom"]


def test_errors_never_exit_1_which_means_regression(box: Path) -> None:
    unknown = _ledger("watch", "a", "--against", "nosuch", "--log", "a.log")
    assert unknown.returncode == 6 and unknown.stderr.startswith("Error: "), unknown.stderr
    itself = _ledger("watch", "a", "--against", "a", "--log", "a.log")
    assert itself.returncode == 2 and "against itself" in itself.stderr
    stop = _ledger("watch", "a", "--stop-on", "nosuch", "--log", "a.log")
    assert stop.returncode == 2 and "--stop-on" in stop.stderr
    launch = _ledger("watch", "a@2", "--log", "a.log")
    assert launch.returncode == 2 and "by its name" in launch.stderr
    folder = _ledger("watch", "a", "--log", str(box))
    assert folder.returncode in (2, 6) and folder.returncode != 1


def test_stop_on_stops_the_trainer_at_its_decision(box: Path) -> None:
    command = [*TRAINER, *PACE, "--level", "10650", "--steps", "100000", "--ending", "ok"]
    done = _ledger("watch", "stopme", "--interval", "0.1", "--json",
                   "--stop-on", "regression,failed", "--", *command)  # fmt: skip
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["stopped"] and result["fate"] == "killed" and result["role"] == "trainer"
    assert (
        not Path(f"/proc/{result['pid']}").exists()
        or "zombie" in Path(f"/proc/{result['pid']}/status").read_text().lower()
    )
    with ledger.open() as lg:
        assert lg.run_summary("stopme").fate == "killed"
        assert "--stop-on regression" in (lg.show("stopme").fate_reason or "")


def test_a_trainer_that_dies_after_the_decision_shows_its_death(box: Path) -> None:
    # The decision did not stop it: the OOM it would have shown at step 400 is shown.
    command = [*TRAINER, *PACE, "--level", "10650", "--steps", "5000", "--ending", "oom",
               "--end-at", "400"]  # fmt: skip
    done = _ledger("watch", "doomed", "--interval", "0.1", "--json", "--", *command)
    assert done.returncode == 3, done.stderr  # failed after the decision
    result = json.loads(done.stdout)
    assert result["outcome"] == "regression" and result["decided_at_step"] < 400
    assert result["fate"] == "oom" and result["exit_code"] not in (None, 0)
    with ledger.open() as lg:
        detail = lg.show("doomed")
        assert detail.fate == "oom" and detail.event_counts.get("oom") == 1
        assert detail.last_step is not None and detail.last_step >= 399


def test_a_relaunch_appended_to_a_finished_runs_log_is_what_watch_judges(box: Path) -> None:
    """`train.py >> train_x.log` again, then `watch x --log train_x.log`: the log's first run
    had finished, so watch waits for what comes next in it and judges that launch alone.
    It said SAME at once, on the finished run's stored steps, while the relaunch was 26 %
    slower."""
    log = box / "train_x.log"
    first = subprocess.run(
        [*TRAINER, "--log", str(log), "--level", "14150", "--steps", "400", "--step-time", "0",
         "--load-time", "0", "--ending", "finish"], check=True,
    )  # fmt: skip
    assert first.returncode == 0 and run_json("ingest", str(log))["fate"] == "finished"
    # nothing appended: nothing judged, no launch left behind
    idle = _ledger("watch", "x", "--log", str(log), "--interval", "0.1", "--timeout", "1")
    assert idle.returncode == 5, idle.stdout + idle.stderr  # undecided
    with ledger.open() as lg:
        assert [(x.number, x.fate) for x in lg.launches("x")] == [(1, "finished")]
    trainer = _trainer(log, "--level", "10650", "--steps", "5000", "--ending", "ok")
    try:
        done = _ledger("watch", "x", "--log", str(log), "--interval", "0.1", "--json")
    finally:
        _stop(trainer)
    assert done.returncode == 1, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["outcome"] == "regression" and result["launch"] == 2
    assert 70 < result["pct_of_reference"] < 80
    with ledger.open() as lg:
        launches = lg.launches("x")
        assert [(x.number, x.steps > 0) for x in launches] == [(1, True), (2, True)]
        assert launches[0].fate == "finished" and launches[0].steps == 400
