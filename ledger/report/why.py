"""The report's "why" card: for an attempt slower than the report's reference, the likely
causes `ledger why` finds (docs/why.md), best first, each with its evidence and what to
try next."""

from __future__ import annotations

import html

from ledger.model.why import WhyResult
from ledger.report.text import clean

SHOWN = 3  # findings on a card
EVIDENCE_SHOWN = 3  # rows under each

CSS = (
    ".why { background: #fbfaf4; border-color: #e6dfb8; } .why h4 { margin: 2px 0 4px 0; } "
    ".why .score { color: #7a6a1a; font-variant-numeric: tabular-nums; }"
)


def _esc(value: object) -> str:
    return f"<bdi>{html.escape(clean(value), quote=True)}</bdi>"


def why_card(result: WhyResult) -> str:
    """The card's HTML; a card saying nothing was found when there is no finding."""
    against = result.against or "the reference"
    head = f"<h4>Why is it slower than {_esc(against)}?</h4>"
    if not result.findings:
        return (
            f'<div class="card why">{head}<div class="muted">no finding: nothing in the '
            "evidence explains the difference</div></div>"
        )
    items = []
    for f in result.findings[:SHOWN]:
        rows = "".join(
            f"<li><code>{_esc(e.table)}{f' #{e.id}' if e.id is not None else ''}</code> "
            f"{_esc(e.text)}</li>"
            for e in f.evidence[:EVIDENCE_SHOWN]
        )
        items.append(
            f'<li><b>{_esc(f.kind)}</b> <span class="score">{f.score:.2f}</span> {_esc(f.claim)}'
            f'<ul class="events">{rows}</ul><div class="muted">next: {_esc(f.next)}</div></li>'
        )
    more = len(result.findings) - SHOWN
    tail = f'<div class="muted">and {more} more (ledger why)</div>' if more > 0 else ""
    return f'<div class="card why">{head}<ol>{"".join(items)}</ol>{tail}</div>'
