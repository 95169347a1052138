"""The HTML report: one self-contained file, figures embedded, nothing fetched.

Every piece of user text (hypotheses, summaries, commands, log lines) goes through
`esc`. As a second line of defence the page carries a Content-Security-Policy that allows
no script and no network request at all, only inline styles and data: images.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Iterable
from typing import Any

from ledger.analyze.wording import short_value
from ledger.model.report import Attempt, ReportData
from ledger.model.terms import FAULT_FATES
from ledger.report.colors import FATE_COLORS

CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)

STYLE = """
body { font: 14px/1.45 -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; color: #1d2430;
       margin: 0 auto; max-width: 1180px; padding: 24px 28px 64px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 34px 0 10px;
     border-bottom: 1px solid #dde2ea; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #5b6575; margin: 0 0 16px; } .muted { color: #6c757d; }
.verdict { background: #f4f7fb; border-left: 4px solid #457b9d; padding: 10px 16px;
           margin: 14px 0; }
.verdict li { margin: 3px 0; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0 4px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 6px 0; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #e7ebf0;
         vertical-align: top; }
th { background: #f7f9fc; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.fate { display: inline-block; padding: 0 7px; border-radius: 9px; color: #fff; font-size: 12px; }
.drift { color: #fff; background: #d62828; padding: 0 6px; border-radius: 3px; font-weight: 700; }
.ok { color: #2a9d8f; font-weight: 600; } .bad { color: #d62828; font-weight: 600; }
code, pre { font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; }
pre { background: #f7f9fc; padding: 6px 8px; overflow-x: auto; white-space: pre-wrap;
      margin: 4px 0; }
.card { border: 1px solid #dde2ea; border-radius: 6px; padding: 8px 14px 10px; margin: 12px 0; }
.chain { margin: 4px 0 0 0; padding-left: 18px; } .chain li { margin: 2px 0; }
"""


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def render_html(data: ReportData, images: dict[str, bytes]) -> str:
    """The whole page; `images` maps figure names to PNG bytes."""
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>ledger report — {esc(data.investigation)}</title>",
        f"<style>{STYLE}</style></head><body>",
        *_header(data),
        *_verdicts(data),
        _figure(
            images, "marathon", "Every attempt in order: steady median, 95 % CI, coloured by fate"
        ),
        *_attempts_table(data),
        _figure(images, "throughput", "Throughput over steps for each run"),
        _figure(images, "step_times", "Step-time distributions"),
        _figure(images, "gpus", "GPU memory and utilisation from probes"),
        *_chains(data),
        *_timeline(data),
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p)


def _header(data: ReportData) -> list[str]:
    base = data.baseline
    baseline = (
        f"baseline {short_value(base.value)} {esc(base.unit or '')}"
        if base.value is not None
        else "no baseline set"
    )
    return [
        f"<h1>Throughput investigation: {esc(data.investigation)}</h1>",
        f'<p class="meta">{baseline} · {len(data.attempts)} attempts · '
        f"{len(data.hypotheses)} hypotheses · "
        f"generated {esc(data.generated_at.strftime('%Y-%m-%d %H:%M UTC'))} "
        f"from {esc(data.db)}</p>",
    ]


def _verdicts(data: ReportData) -> list[str]:
    items = []
    analysed = data.analysed
    if analysed and data.baseline.value is not None:
        latest = analysed[-1]
        items.append(f"Latest attempt: {_against_baseline(latest)}")
        # The first analysed run is the reference the others are compared with.
        tried = analysed[1:] or analysed
        best = max(tried, key=lambda a: a.analysis.median if a.analysis else -math.inf)
        if best is not latest:
            items.append(f"Best attempt: {_against_baseline(best)}")
    for attempt in data.attempts:
        if attempt.comparison is not None:
            items.append(esc(attempt.comparison.summary))
    for attempt in data.attempts:
        if attempt.fate in FAULT_FATES:
            reason = f": {esc(attempt.detail.fate_reason)}" if attempt.detail.fate_reason else ""
            items.append(
                f"<b>{esc(attempt.name)}</b> ended "
                f'<span class="bad">{esc(attempt.fate)}</span>{reason}'
            )
    if not items:
        return []
    return ['<div class="verdict"><ul>', *[f"<li>{i}</li>" for i in items], "</ul></div>"]


def _against_baseline(attempt: Attempt) -> str:
    a = attempt.analysis
    assert a is not None and a.vs_baseline_pct is not None
    state = (
        '<span class="ok">recovered</span>'
        if a.recovered
        else '<span class="bad">not recovered</span>'
    )
    return (
        f"<b>{esc(attempt.name)}</b> at {short_value(a.median)} {esc(a.unit or '')}, "
        f"{a.vs_baseline_pct:.1f} % of the baseline ({state})."
    )


def _figure(images: dict[str, bytes], name: str, alt: str) -> str:
    png = images.get(name)
    if not png:
        return ""
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def _fate(fate: str) -> str:
    color = FATE_COLORS.get(fate, FATE_COLORS["unknown"])
    return f'<span class="fate" style="background:{color}">{esc(fate)}</span>'


def _attempts_table(data: ReportData) -> list[str]:
    rows = []
    for a in data.attempts:
        d, x = a.detail, a.analysis
        median = ci = pct = "–"
        if x is not None:
            median = short_value(x.median)
            if x.ci95 is not None:
                ci = f"{short_value(x.ci95[0])}–{short_value(x.ci95[1])}"
            if x.vs_baseline_pct is not None:
                pct = f"{x.vs_baseline_pct:.1f} %"
        vs = "–"
        if a.comparison is not None:
            c = a.comparison
            vs = f"{c.delta_pct:+.1f} % ({esc(c.verdict)})"
        drift = any(s.drift for s in d.deploy_steps)
        deploys = f"{len(d.deploy_steps)}" + (' <span class="drift">DRIFT</span>' if drift else "")
        hypothesis = (
            f"#{d.hypothesis.id} {esc(d.hypothesis.text)}"
            if d.hypothesis
            else '<span class="muted">–</span>'
        )
        rows.append(
            f"<tr><td><b>{esc(d.run)}</b></td><td>{_fate(d.fate)}</td>"
            f'<td class="num">{d.steps:,}</td>'
            f'<td class="num">{median}</td><td class="num">{ci}</td><td class="num">{pct}</td>'
            f"<td>{vs}</td><td>{hypothesis}</td><td>{deploys}</td>"
            f'<td class="num">{len(d.probes)}</td></tr>'
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "run",
            "fate",
            "steps",
            "steady median",
            "95 % CI",
            "of baseline",
            "vs first",
            "hypothesis",
            "deploys",
            "probes",
        )
    )
    return [
        "<h2>Attempts</h2>",
        f"<table><thead><tr>{head}</tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]


def _chains(data: ReportData) -> list[str]:
    """hypothesis → patch → deploy steps → run → probes → verdict, one card per hypothesis."""
    out = ["<h2>Hypothesis → patch → deploy → run → probes → verdict</h2>"]
    by_hypothesis: dict[int | None, list[Attempt]] = {}
    for attempt in data.attempts:
        key = attempt.detail.hypothesis.id if attempt.detail.hypothesis else None
        by_hypothesis.setdefault(key, []).append(attempt)
    for h in data.hypotheses:
        note = f" — {esc(h.note)}" if h.note else ""
        out.append(f'<div class="card"><h3>#{h.id} {esc(h.text)}</h3>')
        out.append(f'<div class="muted">status: <b>{esc(h.status)}</b>{note}</div>')
        attempts = by_hypothesis.get(h.id, [])
        if not attempts:
            out.append('<div class="muted">no patch tested yet</div>')
        out.extend(_attempt_chain(a) for a in attempts)
        out.append("</div>")
    loose = by_hypothesis.get(None, [])
    if loose:
        out.append('<div class="card"><h3>Runs without a hypothesis</h3>')
        out.extend(_attempt_chain(a) for a in loose)
        out.append("</div>")
    return out


def _attempt_chain(a: Attempt) -> str:
    d = a.detail
    items = []
    if d.patch is not None:
        files = ", ".join(f"<code>{esc(f.path)}</code> {esc(f.sha256[:12])}" for f in d.patch.files)
        items.append(
            f"patch #{d.patch.id}: {esc(d.patch.summary)}" + (f" ({files})" if files else "")
        )
    for s in d.deploy_steps:
        status = "timed out" if s.timed_out else f"exit {esc(s.exit_code)}"
        drift = ""
        if s.drift:
            shipped = esc((s.artifact_sha256 or "")[:12])
            patched = esc((s.expected_sha256 or "")[:12])
            drift = f' <span class="drift">DRIFT</span> shipped {shipped}, patch has {patched}'
        elif s.drift is False:
            drift = ' <span class="ok">artifact matches the patch</span>'
        items.append(
            f"deploy <b>{esc(s.name)}</b>: <code>{esc(s.command)}</code> → {status}{drift}"
        )
    items.append(
        f"run <b>{esc(d.run)}</b> {_fate(d.fate)}"
        + (f" {esc(d.fate_reason)}" if d.fate_reason else "")
    )
    for p in d.probes:
        said = esc(p.conclusion or p.fate or "")
        items.append(f"probe {esc(p.started_at.strftime('%H:%M'))}: {said}")
    if a.analysis is not None:
        x = a.analysis
        pct = f", {x.vs_baseline_pct:.1f} % of baseline" if x.vs_baseline_pct is not None else ""
        items.append(f"steady median {short_value(x.median)} {esc(x.unit or '')}{pct}")
    if a.comparison is not None:
        items.append(f"verdict: {esc(a.comparison.summary)}")
    elif a.why_not_analysed:
        items.append(f'<span class="muted">not analysed: {esc(a.why_not_analysed)}</span>')
    return '<ul class="chain">' + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _timeline(data: ReportData) -> list[str]:
    rows: Iterable[str] = (
        f"<tr><td>{esc(e.when.strftime('%Y-%m-%d %H:%M:%S'))}</td><td>{esc(e.kind)}</td>"
        f"<td>{esc(e.run or '')}</td><td>{esc(e.summary)}</td></tr>"
        for e in data.timeline
    )
    return [
        "<h2>Timeline (UTC)</h2>",
        "<table><thead><tr><th>when</th><th>kind</th><th>run</th><th>what</th></tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]
