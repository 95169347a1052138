"""Progress bars: tqdm and the bars that imitate it.

    Loading weights:  10%|█         | 85/851 [00:12<01:50,  6.93it/s]
    Epoch 3:  45%|████▌     | 45/100 [00:10<00:12, 4.5it/s, loss=2.3, v_num=0]
    Training: 45% 45/100 [00:10<00:12, 4.5it/s]              (no glyphs: Jupyter, pipes)
    Loading: 123it [00:05, 24.1it/s]                        (no total)

`find_bars` returns every state in a segment, so states glued together after their
`\\r` was lost are read one by one; text glued after the last state is handed back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.logs.numbers import scaled_count, to_float
from ledger.logs.state import Serial

_COUNT = r"\d[\d.,]*[kMGTP]?"
_BAR = re.compile(
    rf"(?P<pct>\d{{1,3}}(?:\.\d+)?)%(?:\|(?P<bar>[^|\n]{{0,200}})\||[ \t]+)[ \t]*"
    rf"(?P<n>{_COUNT})/(?P<total>{_COUNT}|\?)"
    r"(?:[ \t]*\[(?P<inner>[^\]\n]{0,400})\])?"
)
_NO_TOTAL = re.compile(
    rf"(?:^|[:\s])(?P<n>{_COUNT})(?P<unit>[a-zA-Z/]{{1,12}})?"
    r" \[(?P<inner>[\d:]+, [^\]\n]{1,300})\]"
)
_RATE = re.compile(r"[ \t]*(?P<rate>[\d.]+[kMGT]?|\?)[ \t]*(?P<unit>[A-Za-z/%]+(?:/[A-Za-z]+)?)")
_LOADING = re.compile(r"load|shard|materializ|download|fetch|restor|checkpoint|init", re.I)


@dataclass
class Bar(Serial):
    """One state of a progress bar."""

    desc: str
    n: float
    total: float | None
    rate: float | None
    unit: str | None
    postfix: str
    line: int = 0

    @property
    def loading(self) -> bool:
        """A bar of weights, shards or checkpoints being loaded, not of training."""
        return bool(_LOADING.search(self.desc))

    @property
    def done(self) -> bool:
        return self.total is not None and self.total > 0 and self.n >= self.total

    @property
    def pct(self) -> float | None:
        if not self.total:
            return None
        return 100.0 * self.n / self.total

    @property
    def key(self) -> str:
        """Which bar this is a state of: its description and total."""
        return f"{self.desc}\x00{self.total}"

    def describe(self) -> str:
        head = self.desc or "progress"
        n = _int_if_whole(self.n)
        if self.total:
            return f"{head} {n}/{_int_if_whole(self.total)} ({self.pct:.0f}%)"
        return f"{head} {n}"


def _int_if_whole(x: float | None) -> float | int | None:
    if x is None:
        return None
    return int(x) if float(x).is_integer() else x


def find_bars(segment: str) -> tuple[list[Bar], str, str]:
    """The bar states in `segment`, the text before the first one that is not its
    description (other output the bar was glued to), and the text after the last one."""
    bars: list[Bar] = []
    at = 0
    desc = ""
    before = ""
    for m in _BAR.finditer(segment):
        gap = segment[at : m.start()]
        if not bars:
            before, gap = _split_desc(gap)
        if gap.strip():
            desc = _desc(gap)
        bar = _make(desc, m.group("n"), m.group("total"), m.group("inner"))
        if bar is not None:
            bars.append(bar)
        at = m.end()
    if not bars:
        m2 = _NO_TOTAL.search(segment)
        if m2 is not None:
            before, gap = _split_desc(segment[: m2.start("n")])
            bar = _make(_desc(gap), m2.group("n"), None, m2.group("inner"))
            if bar is not None and bar.rate is not None:
                return [bar], before, segment[m2.end() :]
        return [], "", segment
    return bars, before, segment[at:]


_GLUED = re.compile(r"^(?P<before>.*[\]})](?:\s|$)|.*\s{2,})(?P<desc>[^\]})]*)$")


def _split_desc(gap: str) -> tuple[str, str]:
    """Output glued before a bar, and the bar's own description: a description is short
    and follows the end of what came before (`…}`, `…]`, a run of spaces)."""
    if len(gap) <= 60:
        return "", gap
    m = _GLUED.match(gap)
    if m is not None and len(m.group("desc")) <= 80:
        return m.group("before"), m.group("desc")
    return "", gap


def _desc(text: str) -> str:
    text = text.strip().rstrip(": ").strip()
    # A desc is short; anything longer is other output the bar was glued to.
    return text[-120:]


def _make(desc: str, n_text: str, total_text: str | None, inner: str | None) -> Bar | None:
    n = scaled_count(n_text)
    if n is None:
        return None
    total = None if total_text in (None, "?") else scaled_count(total_text or "")
    rate = unit = None
    postfix = ""
    if inner:
        parts = inner.split(",", 1)
        # inner: "<elapsed><<remaining>, <rate><unit>[, postfix]" (older tqdm: "<elapsed>, rate")
        rest = parts[1] if len(parts) > 1 else ""
        rm = _RATE.match(rest)
        if rm is not None:
            rate_text = rm.group("rate")
            rate = None if rate_text == "?" else to_float(rate_text.rstrip("kMGT"))
            if rate is not None and rate_text[-1] in "kMGT":
                rate *= {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}[rate_text[-1]]
            unit = rm.group("unit")
            postfix = rest[rm.end() :].lstrip(", ").strip()
        else:
            postfix = rest.strip()
    return Bar(desc, n, total, rate, unit, postfix)
