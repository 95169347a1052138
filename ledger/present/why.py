"""`ledger why` in words: the difference, then each finding with its evidence and what
to try next."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ledger.model.why import Finding, WhyResult


def finding_line(f: Finding) -> str:
    return f"[{f.kind}, {f.score:.2f}] {f.claim}"


def render_why(result: WhyResult) -> str:
    lines = [result.summary + ("" if result.summary.endswith(".") else ".")]
    for note in result.notes:
        lines.append(f"note: {note}")
    if not result.findings:
        lines.append(
            "no finding: nothing in the evidence explains a difference"
            if result.verdict is not None
            else "no finding (the difference is unknown: too little data)"
        )
        return "\n".join(lines)
    for number, f in enumerate(result.findings, 1):
        lines.append("")
        lines.append(f"{number}. {finding_line(f)}")
        if f.explains:
            lines.append(f"   explains: {', '.join(f.explains)}")
        for e in f.evidence:
            where = f"{e.table}" + (f" #{e.id}" if e.id is not None else "")
            lines.append(f"     {where}: {e.text}")
        lines.append(f"   next: {f.next}")
    return "\n".join(lines)
