"""What ledger keeps beside the ledger of a command's output (`watch -- COMMAND`,
`ingest -`): redacted as it is written, bounded, and kept up with under a flood."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_json
from secret_shapes import SHAPES, leaks

from ledger.watch.pump import Sampler, pump

STEPS = "".join(f"step {i} | loss 2.{i:03d} | tokens/s 14,2{i % 10}0\n" for i in range(1, 60))


def _ledger(
    *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ledger", *args], input=stdin, capture_output=True,
        timeout=timeout, check=False, env={**os.environ, **(env or {})},
    )  # fmt: skip


def _ledger_files(db: Path) -> str:
    """Every byte ledger wrote: the ledger, its -wal, and everything under streams/."""
    files = [*db.parent.glob(db.name + "*"), *(db.parent / "streams").rglob("*")]
    return "\n".join(p.read_bytes().decode("utf-8", errors="replace") for p in files if p.is_file())


@pytest.fixture
def box(db_url: str, tmp_path: Path) -> Path:
    run_json("init", "--baseline", "14200", "--unit", "tok/s")
    return tmp_path


def _secret_output(box: Path) -> Path:
    (box / "input").mkdir()
    out = box / "input" / "secrets.txt"
    out.write_text("".join(f"{s.text}\n" for s in SHAPES) + STEPS, encoding="utf-8")
    return out


@pytest.mark.sqlite_only  # what is searched is the folder the SQLite ledger lives in
def test_no_secret_reaches_the_files_beside_the_ledger(box: Path, db_url: str) -> None:
    text = _secret_output(box)
    watched = _ledger("watch", "printed", "--timeout", "60", "--", "cat", str(text))
    assert watched.returncode in (0, 1, 5), watched.stderr
    # another launch's output (the same bytes twice would be one log under two names)
    other = "".join(f"{s.text}\n" for s in reversed(SHAPES)) + STEPS
    piped = _ledger("ingest", "-", "--run", "piped", stdin=other.encode())
    assert piped.returncode == 0, piped.stderr
    db = Path(db_url.removeprefix("sqlite:///"))
    streams = list((db.parent / "streams").glob("*.log"))
    assert len(streams) == 2, streams  # both kept their output, redacted
    kept = _ledger_files(db)
    assert "step 59" in kept  # the search reads what was written
    found = {s.name: f for s in SHAPES if (f := leaks(s.secret, kept))}
    assert found == {}
    steps = [r["steps"] for r in run_json("runs") if r["run"] in ("printed", "piped")]
    assert steps == [59, 59]


def test_the_pump_keeps_everything_below_its_cap_and_samples_above_it() -> None:
    lines = [f"step {i} | loss 1.0 | tokens/s 14200\n".encode() for i in range(20_000)]
    lines[15_000] = b"Traceback (most recent call last):\n"
    out = io.BytesIO()
    sampler = pump(io.BytesIO(b"".join(lines)), out, cap=64 * 1024)
    kept = out.getvalue()
    assert kept.startswith(lines[0])
    assert b"reached its cap" in kept
    assert b"Traceback" in kept  # what a fate is read from is always kept
    assert 64 * 1024 <= len(kept) <= 64 * 1024 * 3 // 2 + 4096
    assert sampler.dropped_lines > 15_000


def test_a_flood_faster_than_redaction_is_sampled_not_fallen_behind() -> None:
    now = [0.0]
    out: list[bytes] = []
    sampler = Sampler(out.append, cap=1 << 40, clock=lambda: now[0])
    line = b"x" * 99 + b"\n"
    for _ in range(100):  # 10 MB within one second
        sampler.write(line * 1000)
    assert sampler.dropped_lines > 50_000
    assert any(b"faster than" in chunk for chunk in out)
    now[0] = 2.0  # a calm second after it: everything is kept again
    before = sampler.written
    sampler.write(line * 10)
    assert sampler.written - before == 1000


@pytest.mark.sqlite_only
def test_watch_holds_its_timeout_and_the_cap_under_a_flood(box: Path, db_url: str) -> None:
    # 60 MB as fast as a process can print it, then silence: bounded, so a failure cannot
    # fill a disk. The cap here is 1 MiB.
    flood = (
        "import sys\nline = b'step 1 | loss 2.0 | ' + b'x' * 200 + b'\\n'\n"
        "for _ in range(60 * 1024 * 1024 // len(line)):\n    sys.stdout.buffer.write(line)\n"
        "sys.stdout.flush()\nimport time\ntime.sleep(20)\n"
    )
    start = time.monotonic()
    done = _ledger(
        "watch", "flood", "--timeout", "8", "--json", "--", sys.executable, "-c", flood,
        env={"LEDGER_STREAM_CAP_MB": "1"},
    )  # fmt: skip
    elapsed = time.monotonic() - start
    assert done.returncode == 5, done.stderr  # undecided: nothing to judge, timed out
    assert elapsed < 8 + 30, elapsed  # the timeout held (start-up and the ledger's reads)
    result = json.loads(done.stdout)
    assert result["outcome"] == "undecided"
    stream = next((Path(db_url.removeprefix("sqlite:///")).parent / "streams").glob("flood-*"))
    deadline = time.monotonic() + 60  # the flooder and its pump end by themselves
    while time.monotonic() < deadline:
        size = stream.stat().st_size
        # This test's pump alone (its file is on its command line): other tests' watches,
        # in other workers, have pumps of their own.
        pump = ["pgrep", "-f", f"ledger.watch.pump {stream}"]
        if subprocess.run(pump, capture_output=True).returncode:
            break
        time.sleep(0.5)
    assert size <= (1 << 20) * 3 // 2 + 64 * 1024, size  # the cap, then 1.5x at the most
    assert b"reached its cap" in stream.read_bytes()
