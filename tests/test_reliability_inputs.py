"""Inputs that once went wrong quietly: each now gets one clear line and the right status."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import cli


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_baseline_past_any_throughput_is_refused_before_anything_is_made(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    code, _, err = _run("--db", str(db), "init", "--baseline", "1e300")
    assert code == 2
    assert err.startswith("Error: a baseline of 1e+300") and err.count("\n") == 1
    assert not db.exists()
    code, _, _ = _run("--db", str(db), "init", "--baseline", "14200")
    assert code == 0


def test_demo_into_a_folder_that_cannot_be_made_is_an_error_not_an_internal_one() -> None:
    code, _, err = _run("demo", "--out", "/proc/ledger-demo-nope")
    assert code == 1
    assert err.startswith("Error: cannot make the demo's folder") and "internal" not in err


def test_an_unknown_investigation_is_named_not_empty(db_url: str) -> None:
    assert _run("init", "--baseline", "14200")[0] == 0
    assert _run("--investigation", "drafter", "hypothesis", "add", "the mask closures")[0] == 0
    code, _, err = _run("--investigation", "drafte", "runs")
    assert code == 1
    assert "no investigation 'drafte'" in err and "drafter" in err
    code, out, _ = _run("--investigation", "drafter", "hypothesis", "list")
    assert code == 0 and "the mask closures" in out
    assert _run("runs")[0] == 0  # the default investigation is never "unknown"


@pytest.mark.sqlite_only
def test_db_current_of_a_file_with_overwritten_pages_says_it_is_damaged(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    assert _run("--db", str(db), "init", "--baseline", "14200")[0] == 0
    for i in range(30):
        assert _run("--db", str(db), "hypothesis", "add", f"idea {i} " + "x" * 3000)[0] == 0
    size = db.stat().st_size
    with db.open("r+b") as handle:  # three pages of rows: the schema's own pages still read
        handle.seek(size // 4096 // 2 * 4096)
        handle.write(os.urandom(3 * 4096))
    code, out, err = _run("--db", str(db), "db", "current")
    assert code == 1, out
    assert err.startswith("Error:") and "up to date" not in out


@pytest.fixture
def read_only_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A folder and a read-only bind mount of it (root may write anywhere otherwise)."""
    source, mount = tmp_path / "src", tmp_path / "ro"
    source.mkdir()
    mount.mkdir()
    bound = subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True)
    if bound.returncode:
        pytest.skip(f"cannot bind-mount here: {bound.stderr.decode().strip()}")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], check=True)
        yield source, mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.sqlite_only
def test_a_read_only_folder_with_a_wal_and_no_shm_is_refused_not_read_short(
    read_only_mount: tuple[Path, Path],
) -> None:
    source, mount = read_only_mount
    db = source / "ledger.db"
    # A process that wrote rows and died: its -wal holds them, its -shm is then removed.
    code = (
        "import os, ledger\n"
        f"lg = ledger.open({str(db)!r})\n"
        "lg.set_baseline(14200)\n"
        "lg.add_steps('eager', [{'step': i, 'throughput': 14000.0} for i in range(50)])\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert Path(f"{db}-wal").stat().st_size > 0
    Path(f"{db}-shm").unlink()
    code_, out, err = _run("--db", str(mount / "ledger.db"), "runs")
    assert code_ == 1, out
    assert "ledger.db-wal" in err and "read-only" in err


def test_a_probe_showing_an_earlier_step_does_not_undo_a_crash(db_url: str, tmp_path: Path) -> None:
    log = tmp_path / "train_a.log"
    log.write_text("step 1 | loss 2.0 | tokens/s 14200\nstep 2 | loss 2.0 | tokens/s 14200\n")
    assert _run("init")[0] == 0
    assert _run("ingest", str(log))[0] == 0
    with log.open("a") as out:
        out.write("step 3 | loss 2.0 | tokens/s 14200\nTraceback (most recent call last):\n")
        out.write("RuntimeError: boom\n")
    assert _run("ingest", str(log))[0] == 0
    stale = "step 2 | loss 2.0 | tokens/s 14200\n"  # a tail of the log from before the crash
    code, _, err = _run("probe", "--run", "a", "--", "printf", stale)
    assert code == 0, err
    import ledger

    with ledger.open(db_url) as lg:
        summary = lg.run_summary("a")
        assert summary.fate == "crashed"
        assert lg.show("a").probes[-1].fate == "running"  # the probe keeps what it saw


def test_a_probe_conclusion_is_cut_at_a_word_with_an_ellipsis(db_url: str) -> None:
    words = " ".join(f"word{i:03d}" for i in range(60))  # 479 characters of whole words
    out = f"step 3 | loss 2.0\\nTraceback (most recent call last):\\nRuntimeError: {words}\\n"
    assert _run("init")[0] == 0
    code, _, err = _run("probe", "--run", "a", "--new", "--", "printf", out)
    assert code == 0, err
    import ledger

    with ledger.open(db_url) as lg:
        conclusion = lg.show("a").probes[-1].conclusion or ""
    assert conclusion.endswith("…"), conclusion
    last = conclusion[:-1].split()[-1]
    assert last.startswith("word") and len(last) == 7  # a whole word before the ellipsis
