"""Per-rank series: which rank a tracker's scalar or run belongs to, by its name.

Trackers keep one history per run, so a distributed job that logs every rank does it in
one of two ways, both read here:

- one run per rank: a TensorBoard folder `runs/eager/rank1/`, a trackio or W&B run
  named `eager-rank1` (or `rank1` in the group `eager`): run `eager`, rank 1;
- one run whose scalar names carry the rank: `rank1/loss`, `train/loss/rank_1`, W&B's
  nested `{"rank1": {"loss": …}}` (`rank1.loss`): scalar `loss` (or `train/loss`), rank 1.

A name part is a rank when it is `rank` and a number, joined by nothing, `_` or `-`
(`rank3`, `rank_3`, `rank-3`); `rank` alone, `ranking` or `rank3x` are not.
"""

from __future__ import annotations

import re

from ledger.model.imports import TrackedRun

_PART = re.compile(r"rank[_-]?(\d{1,6})", re.I)
_RUN = re.compile(
    r"^(?:(?P<base>.+?)[-_/. ](?P<n>rank[_-]?\d{1,6})"  # eager-rank1
    r"|(?P<n2>rank[_-]?\d{1,6})(?:[-_/. ](?P<base2>.+))?)$",  # rank1, rank1-eager
    re.I,
)
_SEPARATORS = re.compile(r"([/.])")


def scalar_rank(name: str) -> tuple[str, int | None]:
    """`rank1/loss` → (`loss`, 1); a name with no rank part (or only one) → (name, None)."""
    if "rank" not in name.lower():  # the common case, without a regex
        return name, None
    parts = _SEPARATORS.split(name)  # names at even places, separators between
    found = [i for i in range(0, len(parts), 2) if _PART.fullmatch(parts[i])]
    if len(found) != 1 or len(parts) == 1:
        return name, None
    i = found[0]
    match = _PART.fullmatch(parts[i])
    assert match is not None
    rest = parts[:i] + parts[i + 2 :] if i + 1 < len(parts) else parts[: i - 1]
    return "".join(rest), int(match.group(1))


def run_rank(name: str) -> tuple[str, int | None]:
    """`eager-rank1` → (`eager`, 1), `rank1` → (``, 1), `eager` → (`eager`, None)."""
    match = _RUN.match(name)
    if match is None:
        return name, None
    part = match.group("n") or match.group("n2")
    number = _PART.fullmatch(part)
    assert number is not None
    return match.group("base") or match.group("base2") or "", int(number.group(1))


def assign(run: TrackedRun) -> None:
    """Give `run` its rank: from its name (a run per rank, the group's name when the run's
    own is only `rankN`), and its scalars theirs (a rank in their names)."""
    base, rank = run_rank(run.name)
    if rank is not None and (base or run.group):
        run.name, run.rank = base or str(run.group), rank
        run.scalars = {
            name: [(rank, s, v, w) for _, s, v, w in points] for name, points in run.scalars.items()
        }
    renamed: dict[str, list[tuple[int, int, float, float | None]]] = {}
    for name, points in run.scalars.items():
        plain, own = scalar_rank(name)
        if own is not None:
            points = [(own, s, v, w) for _, s, v, w in points]
        renamed.setdefault(plain, []).extend(points)
    run.scalars = renamed
