"""The use cases that run a command between two transactions: a deploy step (`ledger
deploy`) and a probe (`ledger probe`). Each writes its row before the command starts, runs
it with no transaction open (ledger.proc: a process group of its own, stopped on SIGTERM,
SIGHUP or Ctrl-C), then writes what it did; a probe's output is read as a log
(ledger.store.probes, over ledger.logs) before it is stored."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ledger.model import records
from ledger.proc import give_back, stoppable
from ledger.store import deploys, probes, settings
from ledger.store.ingest import STALL_AFTER_S

if TYPE_CHECKING:
    from ledger.store import Store

Echo = Callable[[bytes], None]


def deploy(
    store: Store,
    run: str,
    step: str,
    command: Sequence[str],
    *,
    artifact: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
    echo: Echo | None = None,
    allow_drift: bool = False,
    new: bool = False,
) -> records.DeployStep:
    """Run one deploy step (no shell) and record it (the row exists before the command
    starts). A drifted artifact holds the step, not run (`held`), unless `allow_drift`.
    SIGTERM, SIGHUP and Ctrl-C stop the command's process group and close the row
    before they are given back (ledger.proc). An unknown run is refused unless `new`."""
    argv = deploys.check_command(command, step)
    check = store.check_artifact(run, artifact) if artifact is not None else None
    held = bool(check is not None and check.drift) and not allow_drift
    with stoppable() as stop:
        with store.write_session() as (s, inv):
            row, note = deploys.new_step(s, inv, run, step, argv, check, new=new, held=held)
            if held:
                return deploys.record(row, run, note)
            step_id = row.id
        result = deploys.run(argv, timeout=timeout, echo=echo, stop=stop)
        with store.write_session() as (s, _):
            done = deploys.finish_step(s, step_id, run, result, note)
        give_back(stop, result)
    return done


def probe(
    store: Store,
    run: str,
    command: Sequence[str],
    *,
    wait: float = 0.0,
    timeout: float | None = None,
    echo: Echo | None = None,
    patterns: Sequence[str] = (),
    stall_after: float = STALL_AFTER_S,
    sleep: Callable[[float], None] = time.sleep,
    new: bool = False,
) -> records.ProbeResult:
    """Wait `wait` seconds, run `command` (no shell), record and read what it said. An
    unknown run is refused unless `new`; signals are taken as `deploy` takes them."""
    argv = probes.check_command(command, patterns)  # a bad pattern fails before the wait
    with stoppable() as stop:
        with store.write_session() as (s, inv):
            probe_id, run_id = probes.start(s, inv, run, argv, new)
            kept = settings.patterns(s)
        if not probes.wait(wait, sleep, stop):
            with store.write_session() as (s, _):
                probes.interrupted(s, probe_id, stop)
            give_back(stop, None)
        result = deploys.run(argv, timeout=timeout, echo=echo, stop=stop)
        with store.read_session() as (s, _):
            earlier = probes.previous(s, run_id, probe_id)
        reading = probes.read_output(
            run, probe_id, argv, result, [*kept, *patterns], earlier, stall_after
        )
        with store.write_session() as (s, _):
            probes.finish(s, probe_id, run_id, result, reading)
        give_back(stop, result)
    return probes.result_record(probe_id, run, result, reading)
