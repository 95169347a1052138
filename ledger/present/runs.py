"""`ledger show` in words: a run, its figures, its launches, what was done to it and what
its logs and probes said."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ledger.present.table import local_time

if TYPE_CHECKING:
    from ledger.model import records


def step_count(rows: int, last: int | None) -> str:
    """Step rows, and the last step where they differ (a log that prints every 10th step)."""
    if last is None or last in (rows, rows - 1):
        return f"{rows:,}"
    return f"{rows:,} (last step {last:,})"


def _figures(d: records.RunDetail) -> list[str]:
    """Throughput, the last verdict and the launches: where the run stands, in three lines."""
    from ledger.present.words import short_value

    lines = []
    if d.effective is not None:
        pct = f", {d.pct_of_baseline:.1f} % of the baseline" if d.pct_of_baseline else ""
        unit = f" {d.throughput_unit}" if d.throughput_unit else ""
        lines.append(f"  throughput: effective {short_value(d.effective)}{unit}{pct}")
    if d.decision is not None:
        c = d.decision
        against = f"against {c.a}" if c.a else "against the baseline"
        at = f"@{c.launch_b}" if c.launch_b and d.launch > 1 else ""
        lines.append(f"  last verdict ({c.kind}{at}, {against}): {c.verdict} — {c.summary}")
    if len(d.launches) > 1:
        lines.append("  launches:")
    for launch in d.launches if len(d.launches) > 1 else ():
        how = f", exit {launch.exit_code}" if launch.exit_code is not None else ""
        verdict = f", {launch.verdict}" if launch.verdict else ""
        if launch.verdict and launch.effective:
            verdict += f" at {short_value(launch.effective)}"
        lines.append(
            f"    {d.run}@{launch.number} {local_time(launch.started_at)}"
            f"{f' ({launch.source})' if launch.source else ''}: {launch.fate}{how}, "
            f"{launch.steps:,} steps{verdict}"
        )
    return lines


def render_run(d: records.RunDetail) -> str:
    lines = [f"run {d.run}  (fate: {d.fate}{' — ' + d.fate_reason if d.fate_reason else ''})"]
    lines.append(
        f"  created {local_time(d.created_at)}; {step_count(d.steps, d.last_step)} steps "
        f"on {d.ranks} rank(s)" + (f" (launch {d.launch})" if d.launch > 1 else "")
    )
    lines.extend(_figures(d))
    if d.hypothesis is not None:
        lines.append(
            f"  hypothesis #{d.hypothesis.id} ({d.hypothesis.status}): {d.hypothesis.text}"
        )
    if d.patch is not None:
        commit = f", commit {d.patch.git_commit[:10]}" if d.patch.git_commit else ""
        lines.append(f"  patch #{d.patch.id}: {d.patch.summary}{commit}")
        for f in d.patch.files:
            lines.append(f"    {f.sha256[:12]}  {f.path}")
        if d.patch.diff:
            lines.append(f"    diff: {len(d.patch.diff.splitlines())} lines (--json shows it)")
    else:
        lines.append("  no patch recorded (ledger record-fix --run " + d.run + ")")
    if d.deploy_steps:
        lines.append("  deploy steps:")
    for s in d.deploy_steps:
        status = "running?" if s.exit_code is None else f"exit {s.exit_code}"
        if s.held:
            status = "not run"
        if s.timed_out:
            status = "timed out"
        drift = {True: "  DRIFT: stale artifact", False: "  artifact matches the patch", None: ""}[
            s.drift
        ]
        lines.append(
            f"    #{s.id} {local_time(s.started_at)} {s.name}: {s.command}  → {status}{drift}"
        )
        if s.output:
            last = [ln for ln in s.output.strip().splitlines() if ln.strip()][-3:]
            lines.extend(f"        | {ln[:120]}" for ln in last)
    for log in d.log_files:
        unread = f", {log.unread_lines:,} unread" if log.unread_lines else ""
        of = f" (launch {log.launch})" if len(d.launches) > 1 else ""
        lines.append(f"  log {log.path}{of}: {log.lines} lines, {log.size:,} bytes read{unread}")
    if d.event_counts:
        counts = ", ".join(f"{kind} ×{n}" for kind, n in d.event_counts.items())
        lines.append(f"  events: {counts}")
    for e in d.events[-5:]:
        step = f" at step {e.step:,}" if e.step is not None else ""
        lines.append(f"    {e.kind}{step} ({e.where}): {e.text.splitlines()[0][:140]}")
    for p in d.probes:
        status = "timed out" if p.timed_out else f"exit {p.exit_code}"
        lines.append(
            f"  probe #{p.id} {local_time(p.started_at)} → {status}: {p.conclusion or p.fate or ''}"
        )
    return "\n".join(lines)
