"""`ledger serve` without a browser: the downsampled read and the other live reads, then a
real server in a subprocess (free port) answered over HTTP: JSON endpoints, the token, the
Host check, read-only, errors without tracebacks, and the missing extra."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_report_fixtures import add_events, run_id, steps

import ledger
from ledger.errors import StorageError
from ledger.usecases.ledger import Ledger

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

URL_LINE = re.compile(r" on (http://\S+) \(Ctrl-C")


@contextmanager
def serving(db: str, *args: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`ledger serve` on a free port in a subprocess; yields its address (with ?token= when
    it has one) and always stops it."""
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--db", db, "--port", "0", "--no-open", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = URL_LINE.search(line)
        assert found, f"no address in {line!r}: {proc.stderr.read() if proc.poll() else ''}"
        # the rest of stderr is read as it comes, so the server never blocks on a full pipe
        drain = threading.Thread(target=proc.stderr.read, daemon=True)
        drain.start()
        yield found.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def origin(url: str) -> str:
    return url.split("?")[0].rstrip("/")


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """(status, JSON or text, headers) of a GET."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            body, status, got = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as exc:
        body, status, got = exc.read(), exc.code, dict(exc.headers)
    text = body.decode()
    kind = got.get("content-type", "")
    return status, json.loads(text) if "json" in kind else text, got


def stalled_run(lg: Any, name: str, n: int, stall_at: int, ranks: int = 1) -> None:
    rows = [
        {
            "step": i, "rank": r, "throughput": 100.0 if i == stall_at else 1000.0 + r,
            "loss": 2.0 - i / n, "step_time_s": 4.0 if i == stall_at else 0.4,
        }
        for r in range(ranks)
        for i in range(n)
    ]  # fmt: skip
    lg.add_steps(name, rows, throughput_unit="tok/s")


# -- the live reads (ledger.store.series) ---------------------------------------------------


def test_downsampling_keeps_a_one_step_stall(lg: Any) -> None:
    stalled_run(lg, "long", 30_000, stall_at=12_345)
    found = lg.live_reads().downsampled("long", 700)
    assert len(found.steps) <= 700 and found.rows == 30_000
    low, high = found.columns["throughput"].low, found.columns["throughput"].high
    assert len(low) == len(high) == len(found.steps)
    assert min(v for v in low if v is not None) == 100.0  # the stall is a bucket's minimum
    assert max(v for v in high if v is not None) == 1000.0
    assert max(v for v in found.columns["step_time_s"].high if v is not None) == 4.0
    assert found.steps == sorted(found.steps) and found.steps[0] == 0
    assert (found.first_step, found.last_step) == (0, 29_999)
    # zoomed in, each step is its own bucket and keeps its value
    near = lg.live_reads().downsampled("long", 700, first=12_340, last=12_350)
    assert near.steps == list(range(12_340, 12_351))
    assert near.columns["throughput"].low == near.columns["throughput"].high
    assert near.columns["throughput"].low[5] == 100.0
    assert "memory_reserved_mib" not in near.columns  # a column with no value is not sent


def test_downsampling_per_rank(lg: Any) -> None:
    stalled_run(lg, "ddp", 2_000, stall_at=1_500, ranks=3)
    found = lg.live_reads().downsampled("ddp", 100)
    assert found.ranks == 3 and sorted(found.per_rank) == [0, 1, 2]
    assert all(len(v) == len(found.steps) for v in found.per_rank.values())
    assert np.nanmean(np.array(found.per_rank[2], dtype=float)) > np.nanmean(
        np.array(found.per_rank[0], dtype=float)
    )
    assert min(v for v in found.columns["throughput"].low if v is not None) == 100.0


def test_a_run_without_steps_has_no_buckets(lg: Any) -> None:
    lg.ensure_run("empty")
    found = lg.live_reads().downsampled("empty", 500)
    assert (found.steps, found.rows, found.columns) == ([], 0, {})


def test_gpu_readings_and_configuration(lg: Any) -> None:
    from datetime import UTC, datetime

    from sqlalchemy.orm import Session

    from ledger.db import models as m

    lg.add_steps("ref", steps(1000.0, n=50))
    lg.add_steps("new", steps(900.0, n=50))
    with Session(lg.engine) as s, s.begin():
        for name, value in (("ref", "2.4"), ("new", "2.5")):
            s.add(m.RunConfig(run_id=run_id(lg, name), source="hook", key="torch", value=value))
        s.add(m.RunConfig(run_id=run_id(lg, "new"), source="hook", key="world_size", value="8"))
        s.add(m.RunConfig(run_id=run_id(lg, "ref"), source="log", key="flash", value="on"))
        for i in range(3):
            s.add(
                m.GpuSample(
                    run_id=run_id(lg, "new"), rank=0, gpu_index=0, step=10 * i,
                    sampled_at=datetime(2026, 1, 1, 0, 0, i, tzinfo=UTC), utilization_pct=50.0 + i,
                    power_w=300.0, throttle="sw_power_cap" if i == 2 else None,
                )
            )  # fmt: skip
    reads = lg.live_reads()
    config = reads.configuration("new", "ref")
    by_key = {i.key: i for i in config.items}
    assert (by_key["torch"].value, by_key["torch"].reference, by_key["torch"].differs) == (
        "2.5", "2.4", True,
    )  # fmt: skip
    assert by_key["world_size"].reference is None and by_key["world_size"].differs
    assert [(i.key, i.reference) for i in config.only_in_reference] == [("flash", "on")]
    alone = reads.configuration("new", None)
    assert not any(i.differs for i in alone.items)
    gpus = reads.gpu_readings("new")
    assert [g.utilization_pct for g in gpus] == [50.0, 51.0, 52.0]
    assert gpus[2].throttle == "sw_power_cap" and gpus[0].sampled_at.startswith("2026-01-01")


def test_the_version_changes_with_what_a_page_shows(lg: Any) -> None:
    reads = lg.live_reads()
    lg.add_steps("run", steps(1000.0, n=30))
    first = reads.version()
    assert reads.version() == first  # nothing written: the same
    lg.add_steps("run", [{"step": 31, "throughput": 1000.0}])
    after_steps = reads.version()
    assert after_steps != first
    add_events(lg, "run", [{"kind": "recompile", "text": "recompiled", "step": 5}])
    assert reads.version() != after_steps
    lg.add_steps("other", steps(900.0, n=30))
    lg.set_baseline(1000.0, "tok/s")
    assert len({first, after_steps, reads.version()}) == 3


def test_read_only_refuses_writes_on_either_backend(lg: Any, db_url: str) -> None:
    lg.add_steps("run", steps(1000.0, n=30))
    with Ledger.open(db_url, create=False, read_only=True) as ro:
        assert ro.run_names() == ["run"]
        with pytest.raises(StorageError):
            ro.add_hypothesis("a write through a read-only open")
        with pytest.raises(StorageError):
            ro.set_baseline(1.0, "tok/s")
    assert lg.hypotheses() == [] and lg.baseline().value is None


# -- the server, over HTTP -------------------------------------------------------------------


@pytest.fixture
def served(lg: Any, db_url: str) -> Iterator[str]:
    lg.set_baseline(1000.0, "tok/s")
    lg.add_steps("ref", steps(1000.0, n=300, seed=1), throughput_unit="tok/s")
    lg.add_steps("slow", steps(900.0, n=300, seed=2), throughput_unit="tok/s")
    with serving(db_url) as url:
        yield url


def test_every_endpoint_answers_json(served: str) -> None:
    base = origin(served)
    for path in ("/", "/run?run=slow", "/compare?runs=ref,slow", "/static/uPlot.iife.min.js"):
        status, _, headers = get(base + path)
        assert status == 200, path
        assert "default-src 'self'" in headers["content-security-policy"]
    status, inv, _ = get(base + "/api/investigation")
    assert status == 200 and [a["run"] for a in inv["attempts"]] == ["ref", "slow"]
    assert inv["attempts"][1]["verdict"] == "regression" and inv["reference"] == "ref"
    for path in ("run", "run/analysis", "run/why", "run/events", "run/gpu", "run/decisions"):
        status, _, _ = get(f"{base}/api/{path}?run=slow")
        assert status == 200, path
    status, config, _ = get(f"{base}/api/run/config?run=slow&against=ref")
    assert status == 200 and config["reference"] == "ref"
    status, series, _ = get(f"{base}/api/run/series?run=slow&width=50")
    assert status == 200 and 0 < len(series["steps"]) <= 50 and series["rows"] == 300
    status, compared, _ = get(f"{base}/api/compare?runs=ref,slow")
    assert status == 200 and compared["report"]["comparisons"][0]["verdict"] == "regression"
    assert compared["sentences"][0]["sentence"].startswith("slow is ")


def test_errors_are_words_never_tracebacks(served: str) -> None:
    base = origin(served)
    status, body, _ = get(base + "/api/run?run=nope")
    assert status == 404 and "nope" in body["error"] and "Traceback" not in json.dumps(body)
    status, body, _ = get(base + "/api/run/series?run=slow&width=wide")
    assert status == 400 and "not a number" in body["error"]
    status, body, _ = get(base + "/api/compare?runs=")
    assert status == 400 and "?runs=a,b" in body["error"]
    status, body, _ = get(base + "/nowhere")
    assert status == 404 and "Traceback" not in body


def test_a_host_header_of_another_site_is_refused(served: str) -> None:
    status, body, _ = get(origin(served) + "/api/runs", headers={"Host": "evil.example:80"})
    assert status == 400 and "Host" in body
    status, _, _ = get(origin(served) + "/api/runs", headers={"Host": "localhost"})
    assert status == 200


def test_the_sqlite_file_is_not_touched(lg: Any, db_url: str) -> None:
    if not db_url.startswith("sqlite"):
        pytest.skip("SQLite's file; PostgreSQL is covered by the read-only test")
    lg.add_steps("ref", steps(1000.0, n=100), throughput_unit="tok/s")
    path = Path(db_url.removeprefix("sqlite:///"))
    lg.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with serving(db_url) as url:
        for p in ("/api/investigation", "/api/run?run=ref", "/api/run/series?run=ref"):
            assert get(origin(url) + p)[0] == 200
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    wal = path.with_name(path.name + "-wal")  # a WAL reader may leave an empty one behind
    assert not wal.exists() or wal.stat().st_size == 0


def test_the_token_is_enforced(lg: Any, db_url: str) -> None:
    lg.add_steps("ref", steps(1000.0, n=50), throughput_unit="tok/s")
    with serving(db_url, env={"LEDGER_SERVE_TOKEN": "s3cret"}) as url:
        base = origin(url)
        assert url.endswith("?token=s3cret")  # the address printed opens the page
        for path in ("/", "/api/runs", "/static/common.js"):
            status, body, _ = get(base + path)
            assert status == 401 and "token" in body
        assert get(base + "/api/runs?token=wrong")[0] == 401
        assert get(base + "/api/runs", {"Authorization": "Bearer wrong"})[0] == 401
        assert get(base + "/api/runs", {"Authorization": "Bearer s3cret"})[0] == 200
        status, _, headers = get(base + "/?token=s3cret")
        assert status == 200 and "ledger_serve_token=s3cret" in headers["set-cookie"]
        assert "HttpOnly" in headers["set-cookie"]
        assert get(base + "/api/runs", {"Cookie": "ledger_serve_token=s3cret"})[0] == 200
        assert get(base + "/api/runs", {"Cookie": "ledger_serve_token=nope"})[0] == 401


def _serve_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys\nfrom ledger.cli import main\nsys.argv[0] = 'ledger'\nmain()"
    return subprocess.run(
        [sys.executable, "-c", code, "serve", *args], capture_output=True, text=True,
        timeout=60, env={**os.environ, **(env or {})},
    )  # fmt: skip


def test_beyond_the_loopback_it_needs_a_token(lg: Any, db_url: str) -> None:
    env = {"LEDGER_SERVE_TOKEN": ""}
    done = _serve_cli("--db", db_url, "--host", "0.0.0.0", "--port", "0", "--no-open", env=env)
    assert done.returncode == 2
    assert done.stderr.startswith("Error: serving on 0.0.0.0") and "--token" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_no_ledger_and_a_taken_port_are_one_line_errors(tmp_path: Path, db_url: str) -> None:
    missing = _serve_cli("--db", str(tmp_path / "none.db"), "--no-open")
    assert missing.returncode == 1 and missing.stderr.startswith("Error: no ledger at")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = str(taken.getsockname()[1])
        ledger.open(db_url).close()
        done = _serve_cli("--db", db_url, "--port", port, "--no-open")
    assert done.returncode == 2
    assert done.stderr.startswith(f"Error: cannot listen on 127.0.0.1:{port}")
    assert "Traceback" not in done.stderr


def test_the_missing_extra_is_named() -> None:
    code = (
        "import sys\nsys.modules['starlette'] = None\nfrom ledger.cli import main\n"
        "sys.argv[0] = 'ledger'\nmain()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "serve", "--no-open"], capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        "Error: ledger serve needs starlette, which is not installed: pip install 'ledger[serve]'"
    )


def test_a_bug_gives_a_generic_page_and_its_traceback_goes_to_the_log(
    lg: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """In-process (the server in a thread) so that the API can be made to fail."""
    import uvicorn

    from ledger.serve.app import build_app
    from ledger.serve.server import listen

    lg.add_steps("ref", steps(1000.0, n=50))

    def broken() -> None:
        raise RuntimeError("secret internals at /home/user/x.py")

    lg.runs = broken  # type: ignore[method-assign]  # a bug inside the API, on purpose
    app = build_app(lg, token=None, allowed_hosts=["127.0.0.1"])
    sock = listen("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    caplog.set_level(logging.ERROR, logger="ledger.serve")
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        status, body, _ = get(base + "/api/runs")
        assert status == 500 and body == {"error": "internal error (see the server's terminal)"}
        assert get(base + "/api/run?run=ref")[0] == 200  # one bug does not stop the server
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    assert "secret internals" in caplog.text and "Traceback" in caplog.text
