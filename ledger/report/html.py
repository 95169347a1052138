"""The HTML report: one self-contained file, figures embedded, nothing fetched.

Every piece of user text (run names, hypotheses, summaries, commands, log lines) goes
through `esc`, which also drops the control characters that could reorder the page
(U+202E would mirror a whole verdict line), and inline user text sits in `<bdi>`, so a
right-to-left name cannot pull the numbers beside it out of place. As a second line of
defence the page carries a Content-Security-Policy that allows no script and no network
request at all, only inline styles and data: images.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ledger.analyze.wording import short_value
from ledger.model.report import Attempt, ReportData
from ledger.model.terms import EventKind
from ledger.report import story
from ledger.report.colors import FATE_COLORS
from ledger.report.numbers import grouped, interval_digits, interval_text, value_text
from ledger.report.plots import figure_words, judged, stall_words, typical
from ledger.report.text import clean, short_names
from ledger.report.why import CSS as WHY_CSS
from ledger.report.why import why_card

CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    "base-uri 'none'; form-action 'none'"
)

# overflow-wrap:anywhere lets a 3,000-character run name break inside the word, and the
# `wrap` block's max-width keeps such a name from taking the table's width from the
# other columns: the table stays as wide as the page, every column readable.
STYLE = """
body { font: 14px/1.45 -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; color: #1d2430;
       margin: 0 auto; max-width: 1180px; padding: 24px 28px 64px; overflow-wrap: anywhere; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 34px 0 10px;
     border-bottom: 1px solid #dde2ea; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta { color: #5b6575; margin: 0 0 16px; } .muted { color: #6c757d; }
.verdict { background: #f4f7fb; border-left: 4px solid #457b9d; padding: 10px 16px;
           margin: 14px 0; }
.verdict li { margin: 3px 0; }
img { max-width: 100%; height: auto; display: block; margin: 6px 0 4px; }
figure.chart { margin: 6px 0 4px; } figure.chart svg { display: block; height: auto; }
table { border-collapse: collapse; width: 100%; font-size: 13px; margin: 6px 0; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid #e7ebf0;
         vertical-align: top; overflow-wrap: normal; }
th { background: #f7f9fc; font-weight: 600; }
td .name { overflow-wrap: normal; word-break: normal; }
td .wrap { display: block; min-width: 6em; max-width: 24em; overflow-wrap: anywhere; }
td.text { overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.fate { display: inline-block; padding: 0 7px; border-radius: 9px; color: #fff; font-size: 12px;
        white-space: nowrap; }
.drift { color: #fff; background: #d62828; padding: 0 6px; border-radius: 3px; font-weight: 700; }
.ok { color: #2a9d8f; font-weight: 600; } .bad { color: #d62828; font-weight: 600; }
code, pre { font: 12px/1.4 ui-monospace, Menlo, Consolas, monospace; }
pre { background: #f7f9fc; padding: 6px 8px; overflow-x: auto; white-space: pre-wrap;
      margin: 4px 0; }
.card { border: 1px solid #dde2ea; border-radius: 6px; padding: 8px 14px 10px; margin: 12px 0; }
.chain { margin: 4px 0 0 0; padding-left: 18px; } .chain li { margin: 2px 0; }
.events { margin: 2px 0 0 0; padding-left: 18px; }
@media (max-width: 1000px) {
  table { font-size: 12px; } th, td { padding: 4px 5px; } .fate { padding: 0 5px; }
}
.attempt { border-top: 1px solid #e7ebf0; margin-top: 8px; padding-top: 6px; }
"""


def esc(value: Any) -> str:
    """Text for the page: control and bidi characters dropped, then HTML-escaped."""
    return html.escape(clean(value), quote=True)


def user(value: Any) -> str:
    """User text inline, isolated from the text around it."""
    return f"<bdi>{esc(value)}</bdi>"


NAME_CHARS = 120  # a run name in a sentence or a table; its card shows it whole


def run_name(name: str, label: str | None = None) -> str:
    """A run's name in bold, isolated; shown as `label` (a shortened name) with the whole
    name as its tooltip when one is given."""
    if label is None or label == name:
        return f"<b>{user(name)}</b>"
    return f'<b title="{esc(name)}">{user(label)}</b>'


def pieces(line: Iterable[story.Piece], labels: dict[str, str] | None = None) -> str:
    """A line of the story as HTML; `labels` shortens run names (see `short_labels`)."""
    out = []
    for piece in line:
        if piece.kind == story.NAME:
            out.append(run_name(piece.text, (labels or {}).get(piece.text)))
        elif piece.kind == story.USER:
            out.append(user(piece.text))
        elif piece.kind == story.FATE:
            out.append(_fate(piece.text))
        elif piece.kind in (story.OK, story.BAD):
            out.append(f'<span class="{piece.kind}">{esc(piece.text)}</span>')
        else:
            out.append(esc(piece.text))
    return "".join(out)


def short_labels(data: ReportData) -> dict[str, str]:
    names = [a.name for a in data.attempts] + [e.run for e in data.timeline if e.run]
    return short_names(names, NAME_CHARS)


def render_html(data: ReportData, images: Mapping[str, bytes | str]) -> str:
    """The whole page; `images` maps figure names to inline SVG markup (or PNG bytes)."""
    labels = short_labels(data)
    parts = [
        "<!doctype html>",
        '<html lang="en" dir="ltr"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>ledger report — {esc(data.investigation)}</title>",
        f"<style>{STYLE}{WHY_CSS}</style></head><body>",
        *_header(data),
        *_verdicts(data, labels),
        _figure(
            images,
            "marathon",
            "Every attempt in order: effective throughput, 95 % CI, coloured by fate",
        ),
        *_attempts_table(data, labels),
        _figure(images, "throughput", "Throughput over steps for each run, events marked"),
        _figure(images, "loss", "Loss over steps"),
        _figure(images, "step_times", "Step-time distributions"),
        _figure(images, "gpus", "GPU memory against the card's capacity, and utilisation"),
        *_chains(data, labels),
        *_timeline(data, labels),
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
        f"<h1>Throughput investigation: {user(data.investigation)}</h1>",
        f'<p class="meta">{baseline} · {len(data.attempts)} attempts, in the order they ran · '
        f"{len(data.hypotheses)} hypotheses · "
        f"generated {esc(data.generated_at.strftime('%Y-%m-%d %H:%M UTC'))} "
        f"from {user(data.db)}</p>",
    ]


def _verdicts(data: ReportData, labels: dict[str, str]) -> list[str]:
    items = [pieces(line, labels) for line in story.headline(data)]
    if not items:
        return []
    return ['<div class="verdict"><ul>', *[f"<li>{i}</li>" for i in items], "</ul></div>"]


def _figure(images: Mapping[str, bytes | str], name: str, alt: str) -> str:
    """A chart: inline SVG markup (str) as it is, inside a labelled figure; PNG bytes as
    an embedded image."""
    chart = images.get(name)
    if not chart:
        return ""
    if isinstance(chart, str):
        return f'<figure class="chart" role="img" aria-label="{esc(alt)}">{chart}</figure>'
    data = base64.b64encode(chart).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def _fate(fate: str) -> str:
    color = FATE_COLORS.get(fate, FATE_COLORS["unknown"])
    return f'<span class="fate" style="background:{color}">{esc(fate)}</span>'


def ran_text(attempt: Attempt) -> str:
    if attempt.ran_at is None:
        return "–"
    return f"{attempt.ran_at.strftime('%Y-%m-%d %H:%M')} ({attempt.ran_from})"


EVENT_NAMES: dict[str, tuple[str, str]] = {
    EventKind.RECOMPILE: ("recompile", "recompiles"),
    EventKind.OOM: ("OOM", "OOMs"),
    EventKind.NCCL: ("NCCL failure", "NCCL failures"),
}


def event_counts(attempt: Attempt) -> str:
    """'3 recompiles, 1 OOM'."""
    words = []
    for kind, n in attempt.event_counts.items():
        one, many = EVENT_NAMES.get(kind, (kind, kind))
        if n:
            words.append(f"{n:,} {one if n == 1 else many}")
    return ", ".join(words)


def _ran_cell(attempt: Attempt) -> str:
    if attempt.ran_at is None:
        return "–"
    when = esc(attempt.ran_at.strftime("%Y-%m-%d %H:%M"))
    return f'{when}<br><span class="muted">{esc(attempt.ran_from)}</span>'


class Columns:
    """The table's number formats: one precision per column, enough to tell rows apart."""

    def __init__(self, attempts: Sequence[Attempt]) -> None:
        analyses = [a.analysis for a in attempts if a.analysis is not None]
        self.ci_digits = interval_digits([judged(x)[1] for x in analyses])
        self.median_digits = interval_digits([(judged(x)[0],) * 2 for x in analyses])

    def median(self, attempt: Attempt) -> str:
        """The effective figure the verdict uses (its column is 'effective')."""
        x = attempt.analysis
        if x is None:
            return "–"
        text = value_text(judged(x)[0], self.median_digits)
        if story.died(attempt):
            text += f'<br><span class="muted">before {esc(story.death(attempt))}</span>'
        return text

    def typical(self, attempt: Attempt) -> str:
        """The typical step (median) of the same stretch."""
        x = attempt.analysis
        return "–" if x is None else value_text(typical(x), self.median_digits)

    def ci(self, attempt: Attempt) -> str:
        """The interval, free to break after its dash in a narrow column."""
        x = attempt.analysis
        if x is None:
            return "–"
        return interval_text(judged(x)[1], self.ci_digits).replace("–", "–<wbr>")

    def stalls(self, attempt: Attempt) -> str:
        x = attempt.analysis
        said = stall_words(x) if x is not None else None
        return esc(said) if said else "–"


WHOLE_NAME = 40  # a name up to this long breaks only after _ - . / (never inside a word)


def _name_cell(name: str, label: str | None) -> str:
    """A run name in the table: free to break after `_`, `-`, `.` or `/` and nowhere
    else; a name longer than WHOLE_NAME characters may break anywhere, or it would take
    the table's width from the other columns."""
    shown = label if label is not None else name
    if len(shown) > WHOLE_NAME:
        return f'<span class="wrap">{run_name(name, label)}</span>'
    parts = re.split(r"(?<=[_\-./])", clean(shown))
    inner = "<wbr>".join(esc(p) for p in parts)
    title = f' title="{esc(name)}"' if label is not None and label != name else ""
    return f'<span class="name"><b{title}><bdi>{inner}</bdi></b></span>'


def _attempts_table(data: ReportData, labels: dict[str, str]) -> list[str]:
    columns = Columns(data.attempts)
    rows = []
    for a in data.attempts:
        d, x = a.detail, a.analysis
        pct = "–"
        if x is not None and x.vs_baseline_pct is not None:
            pct = f"{grouped(x.vs_baseline_pct)}\u00a0%"
            if story.implausible(a):
                pct += '<br><span class="bad">not comparable</span>'
        vs = "–"
        if a.comparison is not None:
            c = a.comparison
            vs = f"{grouped(c.delta_pct, signed=True)}\u00a0% ({esc(c.verdict)})"
            if story.comparison_implausible(a):
                vs += '<br><span class="bad">not comparable</span>'
        drift = d.drift  # the run's mark now: a later step that shipped the patch clears it
        deploys = f"{len(d.deploy_steps)}" + (' <span class="drift">DRIFT</span>' if drift else "")
        hypothesis = (
            f'<span class="wrap">#{d.hypothesis.id} {user(d.hypothesis.text)}</span>'
            if d.hypothesis
            else '<span class="muted">–</span>'
        )
        steps = f"{d.steps:,}"
        if x is None and a.why_not_analysed:
            steps += f'<br><span class="muted">{esc(a.why_not_analysed)}</span>'
        rows.append(
            f"<tr><td>{_name_cell(d.run, labels.get(d.run))}</td>"
            f"<td>{_fate(d.fate)}</td>"
            f"<td>{_ran_cell(a)}</td>"
            f'<td class="num">{steps}</td>'
            f'<td class="num">{columns.median(a)}</td><td class="num">{columns.ci(a)}</td>'
            f'<td class="num">{columns.typical(a)}</td><td>{columns.stalls(a)}</td>'
            f'<td class="num">{pct}</td>'
            f"<td>{vs}</td><td>{esc(event_counts(a)) or '–'}</td><td>{hypothesis}</td>"
            f"<td>{deploys} · {len(d.probes)}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "run",
            "fate",
            "ran",
            "steps",
            "effective",
            "95 % CI",
            "typical step (median)",
            "stalls",
            "of baseline",
            "vs first",
            "events",
            "hypothesis",
            "deploys · probes",
        )
    )
    return [
        "<h2>Attempts, in the order they ran</h2>",
        f"<table><thead><tr>{head}</tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]


def _chains(data: ReportData, labels: dict[str, str]) -> list[str]:
    """hypothesis → patch → deploy steps → run → events → probes → verdict, one card per
    hypothesis."""
    out = ["<h2>Hypothesis → patch → deploy → run → probes → verdict</h2>"]
    first = data.analysed[0] if data.analysed else None  # what the comparisons are against
    by_hypothesis: dict[int | None, list[Attempt]] = {}
    for attempt in data.attempts:
        key = attempt.detail.hypothesis.id if attempt.detail.hypothesis else None
        by_hypothesis.setdefault(key, []).append(attempt)
    for h in data.hypotheses:
        note = f" — {user(h.note)}" if h.note else ""
        out.append(f'<div class="card"><h3>#{h.id} {user(h.text)}</h3>')
        out.append(f'<div class="muted">status: <b>{esc(h.status)}</b>{note}</div>')
        attempts = by_hypothesis.get(h.id, [])
        if not attempts:
            out.append('<div class="muted">no patch tested yet</div>')
        out.extend(_attempt_chain(a, labels, first) for a in attempts)
        out.append("</div>")
    loose = by_hypothesis.get(None, [])
    if loose:
        out.append('<div class="card"><h3>Runs without a hypothesis</h3>')
        out.extend(_attempt_chain(a, labels, first) for a in loose)
        out.append("</div>")
    return out


def _attempt_chain(a: Attempt, labels: dict[str, str], reference: Attempt | None) -> str:
    d = a.detail
    items = []
    if d.patch is not None:
        files = ", ".join(
            f"<code>{user(f.path)}</code> {esc(f.sha256[:12])}" for f in d.patch.files
        )
        items.append(
            f"patch #{d.patch.id}: {user(d.patch.summary)}" + (f" ({files})" if files else "")
        )
    for s in d.deploy_steps:
        status = "timed out" if s.timed_out else f"exit {esc(s.exit_code)}"
        status = "not run" if s.held else status  # held: its artifact drifted
        drift = ""
        if s.drift:
            shipped = esc((s.artifact_sha256 or "")[:12])
            patched = esc((s.expected_sha256 or "")[:12])
            verb = "held" if s.held else "shipped"
            drift = f' <span class="drift">DRIFT</span> {verb} {shipped}, patch has {patched}'
        elif s.drift is False:
            drift = ' <span class="ok">artifact matches the patch</span>'
        items.append(f"deploy {run_name(s.name)}: <code>{user(s.command)}</code> → {status}{drift}")
    items.append(
        f"run {run_name(d.run)} {_fate(d.fate)}"
        + (f" {user(d.fate_reason)}" if d.fate_reason else "")
        + f' <span class="muted">ran {esc(ran_text(a))}</span>'
    )
    events = story.event_lines(a)
    if events:
        inner = "".join(f"<li>{pieces(line)}</li>" for line in events)
        items.append(f'events:<ul class="events">{inner}</ul>')
    for p in d.probes:
        said = user(p.conclusion or p.fate or "")
        items.append(f"probe {esc(p.started_at.strftime('%H:%M'))}: {said}")
    if a.analysis is not None:
        x = a.analysis
        pct = ""
        if x.vs_baseline_pct is not None:
            pct = f", {grouped(x.vs_baseline_pct)} % of baseline"
            if story.implausible(a):
                pct += ' <span class="bad">(not comparable: units or scale differ)</span>'
        items.append(
            f"{esc(story.figure_words(a))}: {esc(figure_words(x))} {esc(x.unit or '')}{pct}"
        )
    if a.comparison is not None:
        items.append(f"verdict: {pieces(story.verdict(a, reference), labels)}")
    elif a.why_not_analysed:
        items.append(f'<span class="muted">not analysed: {esc(a.why_not_analysed)}</span>')
    inner = "".join(f"<li>{i}</li>" for i in items)
    card = why_card(a.why) if a.why is not None else ""
    return f'<div class="attempt"><ul class="chain">{inner}</ul>{card}</div>'


def _timeline(data: ReportData, labels: dict[str, str]) -> list[str]:
    rows: Iterable[str] = (
        f'<tr><td style="white-space:nowrap">{esc(e.when.strftime("%Y-%m-%d %H:%M:%S"))}</td>'
        f"<td>{esc(e.kind)}</td>"
        f'<td><span class="wrap">{run_name(e.run, labels.get(e.run)) if e.run else ""}</span></td>'
        f'<td class="text">{pieces(story.isolate(e.summary, [e.run or ""]), labels)}</td></tr>'
        for e in data.timeline
    )
    return [
        "<h2>Timeline (UTC)</h2>",
        "<table><thead><tr><th>when</th><th>kind</th><th>run</th><th>what</th></tr></thead><tbody>",
        *rows,
        "</tbody></table>",
    ]
