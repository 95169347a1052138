"""The report as pages of text drawn by matplotlib: the PDF's first pages (title, verdict,
the attempts table, the chain of each hypothesis) and the PNG's heading (title and
verdict). Text is laid out line by line on pages of one size; long text wraps, a long
run name breaks inside the word rather than running off the page."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ledger.analyze.wording import short_value
from ledger.model.report import Attempt, ReportData
from ledger.report import story
from ledger.report.canvas import PAGE
from ledger.report.glyphs import CLOSE, MONO, OPEN, SANS, drawable, isolate, isolated
from ledger.report.html import Columns, event_counts, ran_text
from ledger.report.numbers import grouped
from ledger.report.plots import figure_words, stall_words
from ledger.report.text import clean, cut_words, escape_math, short_names, shorten, wrap

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ledger.model.why import WhyResult

MARGIN = 0.55  # inches
SANS_WIDTH = 0.62  # a DejaVu Sans character at its widest common advance, in ems: lines stay in
MONO_WIDTH = 0.602  # DejaVu Sans Mono's advance, in ems
NAME_CHARS = 60  # a run name in a sentence or the table of the PDF
CHAIN_NAME_CHARS = 240  # a run name heading its chain: longer, still not a page of it
LINE_SPACING = 1.32


@dataclass(frozen=True)
class Style:
    size: float = 9.0
    weight: str = "normal"
    family: str = "sans-serif"
    color: str = "#1d2430"
    indent: float = 0.0  # inches
    before: float = 0.0  # space above, in points


TITLE = Style(size=16, weight="bold")
META = Style(size=8.5, color="#5b6575")
HEADING = Style(size=11.5, weight="bold", before=10)
SUBHEADING = Style(size=9.5, weight="bold", before=6)
TEXT = Style()
BULLET = Style(indent=0.18)
DETAIL = Style(size=8.5, indent=0.36)
TABLE = Style(size=7.2, family="monospace")
TABLE_HEAD = Style(size=7.2, family="monospace", weight="bold")


@dataclass
class Flow:
    """Lines poured onto pages of one size, a new page when one is full."""

    size: tuple[float, float] = PAGE
    top: float = MARGIN  # inches above the first line of a page
    pages: list[Figure] = field(default_factory=list)
    y: float = 0.0  # inches from the top of the current page

    def width_chars(self, style: Style) -> int:
        usable = (self.size[0] - 2 * MARGIN - style.indent) * 72
        per_char = style.size * (MONO_WIDTH if style.family == "monospace" else SANS_WIDTH)
        return max(20, int(usable / per_char))

    def line(self, text: str, style: Style = TEXT) -> None:
        height = style.size * LINE_SPACING / 72
        before = style.before / 72
        if not self.pages or self.y + before + height > self.size[1] - MARGIN:
            self._new_page()
            before = 0.0
        self.y += before
        page = self.pages[-1]
        page.text(
            (MARGIN + style.indent) / self.size[0], 1 - self.y / self.size[1],
            isolated(escape_math(drawable(clean(text).replace("\n", " ")))),
            fontsize=style.size, fontweight=style.weight,
            family=MONO if style.family == "monospace" else SANS,
            color=style.color, va="top", ha="left",
        )  # fmt: skip
        self.y += height

    def paragraph(self, text: str, style: Style = TEXT, *, hanging: str = "") -> None:
        """`text` wrapped to the page; `hanging` (a bullet) starts the first line only."""
        width = self.width_chars(style) - len(hanging)
        for i, line in enumerate(wrap(text, width)):
            self.line((hanging if i == 0 else " " * len(hanging)) + line, style)

    def _new_page(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        page = Figure(figsize=self.size)  # no layout engine: positions are absolute
        FigureCanvasAgg(page)
        self.pages.append(page)
        self.y = self.top

    def space(self, points: float) -> None:
        self.y += points / 72


def title_lines(data: ReportData) -> tuple[str, str]:
    base = data.baseline
    baseline = (
        f"baseline {short_value(base.value)} {base.unit or ''}".strip()
        if base.value is not None
        else "no baseline set"
    )
    meta = (
        f"{baseline} · {len(data.attempts)} attempts, in the order they ran · "
        f"{len(data.hypotheses)} hypotheses · generated "
        f"{data.generated_at.strftime('%Y-%m-%d %H:%M UTC')} from {data.db}"
    )
    return f"Throughput investigation: {data.investigation}", meta


def verdict_texts(data: ReportData) -> list[str]:
    return [story.plain(line, NAME_CHARS) for line in story.headline(data)]


def text_pages(data: ReportData) -> list[Figure]:
    """The PDF's first pages: title, verdict, the attempts table, each hypothesis's chain."""
    flow = Flow()
    title, meta = title_lines(data)
    flow.paragraph(title, TITLE)
    flow.paragraph(meta, META)
    flow.line("Verdict", HEADING)
    verdicts = verdict_texts(data)
    for text in verdicts or ["Nothing measured yet: no run has enough steps (ledger ingest LOG)."]:
        flow.paragraph(text, BULLET, hanging="• ")
    flow.line("Attempts, in the order they ran", HEADING)
    _table(flow, data)
    flow.line("Hypothesis → patch → deploy → run → probes → verdict", HEADING)
    _chains(flow, data)
    flow.line("The figures follow, one to a page.", Style(size=8.5, color="#5b6575", before=10))
    return flow.pages


# name, width (characters), right-aligned
TABLE_COLUMNS = (
    ("run", 30, False),
    ("fate", 8, False),
    ("ran", 29, False),
    ("steps", 8, True),
    ("effective", 10, True),
    ("95 % CI", 19, True),
    ("typical", 8, True),
    ("of base", 10, True),
    ("vs first", 24, False),
    ("events", 0, False),  # the rest of the line
)


def _table(flow: Flow, data: ReportData) -> None:
    total = flow.width_chars(TABLE)
    fixed = sum(w + 1 for _, w, _ in TABLE_COLUMNS if w)
    widths = [w or max(12, total - fixed) for _, w, _ in TABLE_COLUMNS]
    flow.line(_row([h for h, _, _ in TABLE_COLUMNS], widths), TABLE_HEAD)
    columns = Columns(data.attempts)
    labels = short_names([a.name for a in data.attempts], NAME_CHARS)
    for attempt in data.attempts:
        cells = _cells(attempt, columns, labels[attempt.name])
        wrapped = [wrap(cell, width) or [""] for cell, width in zip(cells, widths, strict=True)]
        wrapped[0] = [isolate(line) for line in wrapped[0]]  # the name: isolated
        for i in range(max(len(w) for w in wrapped)):
            flow.line(_row([w[i] if i < len(w) else "" for w in wrapped], widths), TABLE)
    if not data.attempts:
        flow.line("no runs yet", TABLE)


def _cells(a: Attempt, columns: Columns, name: str) -> list[str]:
    x = a.analysis
    median = ci = pct = vs = typical = "–"
    if x is not None:
        typical = columns.typical(a)
        median = columns.median(a).split("<br>")[0]
        if story.died(a):
            median += f" before {story.death(a)}"
        ci = columns.ci(a).replace("<wbr>", "")
        if x.vs_baseline_pct is not None:
            pct = f"{grouped(x.vs_baseline_pct)} %"
            if story.implausible(a):
                pct += " NOT COMPARABLE"
    if a.comparison is not None:
        vs = f"{grouped(a.comparison.delta_pct, signed=True)} % ({a.comparison.verdict})"
        if story.comparison_implausible(a):
            vs += " NOT COMPARABLE"
    steps = f"{a.detail.steps:,}"
    events = event_counts(a) or "–"
    if x is None and a.why_not_analysed:
        events = f"not measured: {a.why_not_analysed}; {events}"
    return [name, a.fate, ran_text(a), steps, median, ci, typical, pct, vs, events]


def _row(cells: list[str], widths: list[int]) -> str:
    out = []
    for (_, _, right), cell, width in zip(TABLE_COLUMNS, cells, widths, strict=True):
        width += sum(cell.count(mark) for mark in (OPEN, CLOSE))  # drawn as nothing
        out.append(cell.rjust(width) if right else cell.ljust(width))
    return " ".join(out).rstrip()


def _chains(flow: Flow, data: ReportData) -> None:
    first = data.analysed[0] if data.analysed else None  # what the comparisons are against
    by_hypothesis: dict[int | None, list[Attempt]] = {}
    for attempt in data.attempts:
        key = attempt.detail.hypothesis.id if attempt.detail.hypothesis else None
        by_hypothesis.setdefault(key, []).append(attempt)
    for h in data.hypotheses:
        flow.paragraph(f"#{h.id} {h.text}  [{h.status}]", SUBHEADING)
        if h.note:
            flow.paragraph(h.note, DETAIL)
        attempts = by_hypothesis.get(h.id, [])
        if not attempts:
            flow.paragraph("no patch tested yet", BULLET)
        for attempt in attempts:
            _chain(flow, attempt, first)
    loose = by_hypothesis.get(None, [])
    if loose:
        flow.paragraph("Runs without a hypothesis", SUBHEADING)
        for attempt in loose:
            _chain(flow, attempt, first)


def _chain(flow: Flow, a: Attempt, reference: Attempt | None) -> None:
    d = a.detail
    reason = f": {d.fate_reason}" if d.fate_reason else ""
    name = isolate(shorten(d.run, CHAIN_NAME_CHARS))
    flow.paragraph(f"run {name} ({d.fate}){reason} — ran {ran_text(a)}", BULLET, hanging="• ")
    if d.patch is not None:
        files = ", ".join(f"{f.path} {f.sha256[:12]}" for f in d.patch.files)
        flow.paragraph(
            f"patch #{d.patch.id}: {d.patch.summary}" + (f" ({files})" if files else ""),
            DETAIL, hanging="– ",
        )  # fmt: skip
    for s in d.deploy_steps:
        status = "timed out" if s.timed_out else f"exit {s.exit_code}"
        status = "not run" if s.held else status  # held: its artifact drifted
        drift = ""
        if s.drift:
            drift = (
                f" DRIFT: {'held' if s.held else 'shipped'} {(s.artifact_sha256 or '')[:12]}, "
                f"patch has {(s.expected_sha256 or '')[:12]}"
            )
        elif s.drift is False:
            drift = " (artifact matches the patch)"
        flow.paragraph(f"deploy {s.name}: {s.command} → {status}{drift}", DETAIL, hanging="– ")
    for line in story.event_lines(a):
        flow.paragraph(story.plain(line, NAME_CHARS), DETAIL, hanging="– ")
    for p in d.probes:
        flow.paragraph(
            f"probe {p.started_at.strftime('%H:%M')}: {p.conclusion or p.fate or ''}",
            DETAIL, hanging="– ",
        )  # fmt: skip
    if a.analysis is not None:
        x = a.analysis
        pct = f", {grouped(x.vs_baseline_pct)} % of baseline" if x.vs_baseline_pct else ""
        if story.implausible(a):
            pct += " (not comparable: units or scale differ)"
        flow.paragraph(
            f"{story.figure_words(a)}: {figure_words(x)} {x.unit or ''}{pct}",
            DETAIL, hanging="– ",
        )  # fmt: skip
        stalls = stall_words(x)
        if stalls:
            flow.paragraph(stalls, DETAIL, hanging="– ")
    if a.comparison is not None:
        said = story.plain(tuple(story.verdict(a, reference)), NAME_CHARS)
        flow.paragraph(f"verdict: {said}", DETAIL, hanging="– ")
    elif a.why_not_analysed:
        flow.paragraph(f"not analysed: {a.why_not_analysed}", DETAIL, hanging="– ")
    if a.why is not None:
        _why(flow, a.why)


def _why(flow: Flow, result: WhyResult) -> None:
    """The why card as text: the likely causes, best first, with evidence and next step."""
    from ledger.report.why import EVIDENCE_SHOWN, SHOWN

    flow.paragraph(f"Why is it slower than {result.against or 'the reference'}?", DETAIL,
                   hanging="– ")  # fmt: skip
    if not result.findings:
        flow.paragraph("no finding: nothing in the evidence explains the difference", DETAIL,
                       hanging="    ")  # fmt: skip
    for i, f in enumerate(result.findings[:SHOWN], start=1):
        flow.paragraph(f"{i}. {f.kind} ({f.score:.2f}): {f.claim}", DETAIL, hanging="    ")
        for e in f.evidence[:EVIDENCE_SHOWN]:
            where = f"{e.table} #{e.id}" if e.id is not None else e.table
            flow.paragraph(f"{where}: {cut_words(e.text, 300)}", DETAIL, hanging="      · ")
        flow.paragraph(f"next: {f.next}", DETAIL, hanging="      ")
    more = len(result.findings) - SHOWN
    if more > 0:
        flow.paragraph(f"and {more} more (ledger why)", DETAIL, hanging="    ")


def heading_figure(data: ReportData, width: float = 11.0) -> Figure:
    """The PNG's top: the title, what it covers, and the verdict."""
    flow = Flow(size=(width, 100.0), top=0.3)  # tall enough for any verdict; cut to size
    title, meta = title_lines(data)
    flow.paragraph(title, TITLE)
    flow.paragraph(meta, META)
    flow.space(4)
    verdicts = verdict_texts(data)
    for text in verdicts or ["Nothing measured yet: no run has enough steps."]:
        flow.paragraph(text, BULLET, hanging="• ")
    used = flow.y + 0.25
    page = flow.pages[0]
    _crop(page, width, used)
    return page


def _crop(page: Figure, width: float, height: float) -> None:
    """Shrink a page drawn 100 inches tall to `height`, keeping the text where it was."""
    tall = page.get_figheight()
    for text in page.texts:
        x, y = text.get_position()
        text.set_position((x, 1 - (1 - y) * tall / height))
    page.set_size_inches(width, height)
