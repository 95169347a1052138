"""What `ledger why` hands out: the difference between two runs, then the likely causes,
ranked, each with the rows that show it. `to_dict()` is what `--json` prints.

docs/why.md lists every kind of finding and the evidence it needs.
"""

from __future__ import annotations

import dataclasses

from ledger.model.records import Record
from ledger.model.terms import FindingKind, Verdict

# The kinds of finding, in the order docs/why.md describes them.
FINDING_KINDS: tuple[FindingKind, ...] = tuple(FindingKind)

# Causes and the symptoms they explain (docs/why.md, "causes before symptoms"): a symptom
# whose evidence a cause's evidence covers (the same steps, the same time) is folded into
# that cause; a symptom no cause covers stays a finding of its own.
_K = FindingKind
SYMPTOM_KINDS: tuple[FindingKind, ...] = (
    _K.GPU_IDLE,
    _K.STEP_SPIKES,
    _K.THROUGHPUT_DROP,
    _K.WARMUP,
)
CAUSE_KINDS: tuple[FindingKind, ...] = tuple(k for k in FindingKind if k not in SYMPTOM_KINDS)

# What the reference of a `why` is: another run, the investigation's baseline (a number),
# or nothing (findings then come from the run's own evidence alone).
AGAINST_RUN = "run"
AGAINST_BASELINE = "baseline"
AGAINST_NONE = "none"


@dataclasses.dataclass(frozen=True)
class Evidence(Record):
    """One row (or log line) behind a finding: its table, its id or line, what it says."""

    table: str  # step, log_event, gpu_sample, run_config, patch, hypothesis, metric, run…
    text: str
    id: int | None = None  # the row's id, where the table has one
    line: int | None = None  # a log line (log_event) or, for a step, the step number

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"table": self.table}
        if self.id is not None:
            out["id"] = self.id
        if self.line is not None:
            out["line"] = self.line
        out["text"] = self.text
        return out


@dataclasses.dataclass(frozen=True)
class Finding(Record):
    """One likely cause: a sentence, how strongly the evidence supports it as a cause of
    this difference (0-1), the rows that show it, and what to try next. `explains`: the
    symptoms folded into it (their evidence follows its own); `--json` has the key only
    when it explains something. `symptom`: for a symptom, how the cause that explains it
    says it (a clause, not in `--json`)."""

    kind: FindingKind
    claim: str
    score: float
    evidence: list[Evidence]
    next: str
    explains: list[FindingKind] = dataclasses.field(default_factory=list)
    symptom: str = ""

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": str(self.kind),
            "claim": self.claim,
            "score": round(self.score, 3),
            "evidence": [e.to_dict() for e in self.evidence],
            "next": self.next,
        }
        if self.explains:
            out["explains"] = [str(k) for k in self.explains]
        return out


@dataclasses.dataclass(frozen=True)
class WhyResult(Record):
    """`ledger why RUN --against REF`: the difference as compare states it, then the
    findings, best first. With little data the difference is unknown (`verdict` None)
    and the findings may be none."""

    run: str
    against: str | None  # the reference run's name; None against the baseline or nothing
    against_kind: str  # AGAINST_RUN, AGAINST_BASELINE or AGAINST_NONE
    unit: str | None
    verdict: Verdict | None  # regression | improvement | no-change; None: unknown
    summary: str  # the difference in words, as compare says it
    delta_pct: float | None  # effective throughput, RUN against REF
    median_delta_pct: float | None
    effective_run: float | None
    effective_ref: float | None
    median_run: float | None
    median_ref: float | None
    findings: list[Finding]
    notes: list[str] = dataclasses.field(default_factory=list)  # what could not be judged

    @property
    def top(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out["findings"] = [f.to_dict() for f in self.findings]
        return out
