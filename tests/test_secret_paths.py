"""No secret reaches the ledger by any path text takes into it.

Each shape of tests/secret_shapes.py is planted in every path: a hypothesis and its note, a
fix's summary and diff, a deploy's command and output (run here and recorded), a probe's
command and output (its crash line becomes the run's fate reason and the conclusion), a
log's lines (its metric lines and its crash line, and the reader's saved state), the hook's
sys.argv, exception message and scalar names, and a run's config. Then every text column of
every table, the SQLite file and its -wal, or `pg_dump`, are searched for any part of it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from secret_shapes import SHAPES, Shape, leaks
from sqlalchemy import String, Text, create_engine, select
from sqlalchemy.engine import make_url

import ledger
from ledger.db import models as m
from ledger.db.engine import session_scope
from ledger.hook import StepMeter
from ledger.redact import is_secret_key
from ledger.usecases.ledger import Ledger

NUMERIC_SECRET = 8675309123  # a secret that parses as a number: `api_key=8675309123`


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _plant(lg: Ledger, i: int, shape: Shape, tmp_path: Path, db_url: str) -> None:
    run = f"r{i}"
    text, line = shape.text, _one_line(shape.text)

    hypothesis = lg.add_hypothesis(f"the relaunch fails when {text}")
    lg.resolve_hypothesis(hypothesis.id, "refuted", note=f"seen: {text}")
    diff = "".join(f"+{row}\n" for row in text.splitlines())
    lg.record_fix(
        hypothesis.id,
        f"pass the credentials: {text}",
        diff=f"--- a/scripts/launch.sh\n+++ b/scripts/launch.sh\n@@ -0,0 +1 @@\n{diff}",
        run=run,
    )

    lg.deploy(run, "print", ["printf", "%s\n", text])  # the shape in the command and output
    lg.deploy(run, "launch", ["true", *_words(text)])  # the shape as the command's words
    lg.record_deploy(run, "remote", ["ssh", "host", *_words(text)], exit_code=1, output=text)

    crash = f"Traceback (most recent call last):\nRuntimeError: {line}\n"
    lg.probe(run, ["printf", "%s\n", f"step 3 | loss 2.0\n{text}\n{crash}"])

    log = tmp_path / f"train_{run}.log"
    log.write_text(
        f"step=1 loss=2.5 lr=3e-4 api_key={NUMERIC_SECRET} tokens/s=1200\n"
        f"step=2 loss=2.4 {line}\n{text}\nstep=3 loss=2.3 tokens/s=1190\n{crash}",
        encoding="utf-8",
    )
    lg.ingest(log, f"log_{run}")
    # The reader's saved state holds an unfinished last line: the shape, cut mid-way.
    grown = tmp_path / f"train_{run}_grown.log"
    grown.write_text(f"step=1 loss=2.5\n{text[: max(1, len(text) // 2)]}", encoding="utf-8")
    lg.ingest(grown, f"grown_{run}")

    _metered(db_url, f"hook_{run}", text, line)

    with session_scope(lg.engine, write=True) as session:
        run_id = lg.run_id(run)
        session.add(m.RunConfig(run_id=run_id, source="api", key="argv", value=text))
        session.add(m.RunConfig(run_id=run_id, source="api", key="env.HF_TOKEN", value=line))


def _metered(db_url: str, run: str, text: str, line: str) -> None:
    argv = sys.argv
    sys.argv = ["train.py", *_words(text)]
    try:
        with pytest.raises(RuntimeError), StepMeter(run, db=db_url, flush_interval=60) as meter:
            with meter.step(tokens=16) as s:
                s.set(loss=1.0, api_key=float(NUMERIC_SECRET))
            meter.log(0, **{f"grad/{line}": 1.0, "hf_token": float(NUMERIC_SECRET)})
            with meter.step(tokens=16):
                raise RuntimeError(f"could not log in: {line}")
    finally:
        sys.argv = argv


def _stored_text(db_url: str) -> Iterator[tuple[str, str, str]]:
    """(table, column, value) of every text column of every row."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            for table in m.Base.metadata.sorted_tables:
                columns = [c for c in table.columns if isinstance(c.type, String | Text)]
                if not columns:
                    continue
                for row in conn.execute(select(*columns)):
                    for column, value in zip(columns, row, strict=True):
                        if value:
                            yield table.name, column.name, str(value)
    finally:
        engine.dispose()


def _raw_bytes(db_url: str) -> bytes:
    """The SQLite file and its -wal as bytes, or the PostgreSQL schema as `pg_dump` writes it."""
    url = make_url(db_url)
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database))
        return b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
    schema = str(url.query["options"]).split("search_path=")[1]
    env = {**os.environ, "PGPASSWORD": url.password or ""}
    dump = subprocess.run(
        ["pg_dump", "-h", url.host or "127.0.0.1", "-p", str(url.port or 5432),
         "-U", url.username or "postgres", "-d", str(url.database), "-n", schema],
        env=env, capture_output=True, check=True, timeout=120,
    )  # fmt: skip
    return dump.stdout


@pytest.mark.slow
def test_no_shape_reaches_the_ledger_by_any_path(db_url: str, tmp_path: Path) -> None:
    with ledger.open(db_url) as lg:
        for i, shape in enumerate(SHAPES):
            _plant(lg, i, shape, tmp_path, db_url)
        assert len(lg.runs()) == 4 * len(SHAPES)  # every path ran: fix, log, grown log, hook

    stored = list(_stored_text(db_url))
    by_table: dict[str, str] = {}
    for table, column, value in stored:
        by_table[f"{table}.{column}"] = by_table.get(f"{table}.{column}", "") + "\n" + value
    found = {
        (shape.name, where): leaked
        for shape in SHAPES
        for where, text in by_table.items()
        if (leaked := leaks(shape.secret, text))
    }
    assert found == {}

    raw = _raw_bytes(db_url)
    assert b"the relaunch fails when" in raw  # the search reads the rows themselves
    in_file = {
        shape.name: fragment
        for shape in SHAPES
        for fragment in leaks(shape.secret, raw.decode("utf-8", errors="replace"))
    }
    assert in_file == {}
    assert str(NUMERIC_SECRET) not in raw.decode("utf-8", errors="replace")

    # A key=value whose key names a secret is not a metric, nor is a name holding a secret.
    with ledger.open(db_url) as lg:
        names = {name for run in lg.run_names() for name in lg.metrics_frame(run)["name"].tolist()}
        values = [v for run in lg.run_names() for v in lg.metrics_frame(run)["value"].tolist()]
    assert not any(is_secret_key(n) for n in names), names
    assert float(NUMERIC_SECRET) not in values
    # What must stay did: the ordinary metrics of the planted log lines.
    assert {"lr"} <= names
