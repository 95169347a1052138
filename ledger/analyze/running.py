"""The running sums behind SequentialMonitor: O(1) per step, whatever the run's length.

Work and cost per steady step (scaled to about 1), the sums the AR(1) bound needs, the
cycles between stalls, and batch sums at every dyadic length from the steady start kept
by a binary counter (a batch of 2^j steps completes, is counted, and pairs with the one
before it into a batch of 2^(j+1)), so that every estimate of ledger.analyze.confseq is
a few arithmetic operations on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.analyze import confseq


@dataclass
class Level:
    """Sums over the complete batches of one dyadic length, and the half-filled next one."""

    count: int = 0
    w: float = 0.0
    c: float = 0.0
    ww: float = 0.0
    wc: float = 0.0
    cc: float = 0.0
    half: tuple[float, float] | None = None

    def take(self, w: float, c: float) -> None:
        self.count += 1
        self.w += w
        self.c += c
        self.ww += w * w
        self.wc += w * c
        self.cc += c * c


class Dyadic:
    """Batch sums at every dyadic length from the steady start: a binary counter."""

    def __init__(self) -> None:
        self.levels: list[Level] = []

    def add(self, w: float, c: float) -> None:
        j = 0
        while True:  # a complete batch of 2**j steps: count it, pair it into level j + 1
            if j + 1 >= len(self.levels):
                self.levels.extend(Level() for _ in range(j + 2 - len(self.levels)))
            self.levels[j].take(w, c)
            above = self.levels[j + 1]
            if above.half is None:
                above.half = (w, c)
                return
            hw, hc = above.half
            above.half = None
            w, c, j = w + hw, c + hc, j + 1

    def longest(self) -> tuple[Level, int] | None:
        """The longest length with MIN_BLOCKS complete batches, and the steps they hold."""
        for j in range(len(self.levels) - 1, -1, -1):
            if self.levels[j].count >= confseq.MIN_BLOCKS:
                return self.levels[j], self.levels[j].count * 2**j
        return None


@dataclass
class RunningSums:
    """The running sums of the steady window (work and cost scaled to about 1)."""

    n: int = 0
    w: float = 0.0
    c: float = 0.0
    # the AR(1) part, on capped costs (a stall step costs what a typical one would)
    cap: float = 0.0
    ww: float = 0.0
    w_cap: float = 0.0
    cap_cap: float = 0.0
    lag_ww: float = 0.0
    lag_wc: float = 0.0
    lag_cc: float = 0.0
    previous: tuple[float, float] | None = None
    # stalls: count, their work and cost, and the cycles between them
    stalls: int = 0
    stall_w: float = 0.0
    stall_c: float = 0.0
    last_stall: tuple[int, float, float] | None = None
    cycles: Level = field(default_factory=Level)
    cycle_steps: int = 0
    batches: Dyadic = field(default_factory=Dyadic)
    capped_batches: Dyadic = field(default_factory=Dyadic)
    _cache: dict[bool, tuple[int, tuple[float, int, float]]] = field(
        default_factory=dict, repr=False
    )

    def add(self, w: float, c: float, stall: bool, capped: float) -> None:
        self.n += 1
        self.w += w
        self.c += c
        self.cap += capped
        self.ww += w * w
        self.w_cap += w * capped
        self.cap_cap += capped * capped
        if self.previous is not None:
            pw, pc = self.previous
            self.lag_ww += w * pw
            self.lag_wc += w * pc + capped * pw
            self.lag_cc += capped * pc
        self.previous = (w, capped)
        if stall:
            self.stalls += 1
            self.stall_w += w
            self.stall_c += c
            if self.last_stall is not None:
                at, lw, lc = self.last_stall
                self.cycles.take(self.w - lw, self.c - lc)
                self.cycle_steps += self.n - at
            self.last_stall = (self.n, self.w, self.c)
        self.batches.add(w, c)
        self.capped_batches.add(w, capped)

    def estimate(self, capped: bool = False) -> tuple[float, int, float]:
        """(R̂, steps behind it, σ²: the per-step relative long-run variance).

        R̂ is taken over the same whole batches as σ² (the longest dyadic ones with
        MIN_BLOCKS complete, or once MIN_CYCLES have closed, the cycles between stalls),
        so a stall in the batch still filling cannot move the estimate before the spread
        has seen it, and where the window cuts a cycle does not bias it
        (ledger.analyze.confseq has the rest). With `capped`, of the typical-step rate:
        every stall step costing what a typical step would. Kept until the next step
        (deciding and reading the state ask several times per step).
        """
        cached = self._cache.get(capped)
        if cached is not None and cached[0] == self.n:
            return cached[1]
        ratio, steps = (self.w / self.cap, self.n) if capped else (self.w / self.c, self.n)
        spread = 0.0
        found: tuple[Level, int] | None
        if capped:
            found = self.capped_batches.longest()
        elif self.cycles.count >= confseq.MIN_CYCLES:
            found = (self.cycles, self.cycle_steps)
        else:
            found = self.batches.longest()
        if found is not None:
            k, steps = found
            ratio = k.w / k.c
            spread = float(confseq.batch_variance(k.count, k.w, k.c, k.ww, k.wc, k.cc, ratio))
            mean_w = k.w / steps
            spread *= float(confseq.inflation(k.count)) / (steps / k.count) / mean_w**2
        # around the capped costs' own ratio, so the residuals have mean zero (a mean far
        # from zero would swamp the lag-1 covariance in rounding)
        step_w = self.w / self.n
        r = self.w / self.cap
        sum_z = (self.w - r * self.cap) / step_w
        sum_zz = (self.ww - 2.0 * r * self.w_cap + r**2 * self.cap_cap) / step_w**2
        sum_lag = (self.lag_ww - r * self.lag_wc + r**2 * self.lag_cc) / step_w**2
        ar = float(confseq.ar1_variance(self.n, sum_z, sum_zz, sum_lag))
        result = (ratio, steps, max(spread, ar))
        self._cache[capped] = (self.n, result)
        return result
