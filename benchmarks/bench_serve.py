"""`ledger serve` on a 1M-step run: the downsampled read, and the run page in headless chromium.

    .venv/bin/python benchmarks/bench_serve.py [--steps 1000000] [--repeat 5] [--width 1200]

Builds a temporary SQLite ledger with one single-rank run of N steps (warm-up, AR(1)
noise, a stall every 1,000 steps; throughput, tokens, loss, step time) beside a baseline,
starts `ledger serve` in a subprocess on a free port, and times, medians over the
repetitions:

- bulk read (the reference): `Ledger.steps_frame(run, the chart's columns)` in this
  process, every row the charts are made from;
- series: GET /api/run/series (width buckets) over HTTP, the first (read from the
  database and bucketed) and then warm (kept until the run's steps change);
- page, first: the whole run page the first time (the analysis and `why` computed);
- page, warm: a chromium tab already open navigates to the run's page until its charts
  are drawn (the goal: 1 s); then until the whole page (analysis, why, config) is;
- page, fresh: a new chromium process started, the same navigation (the goal: 3 s,
  the browser's start included);
- live: a run added while the investigation page is open, until it shows (goal: 2 s).

Also checks that the served minima hold the stalls (no stall smoothed away) and that no
more buckets were served than the chart is wide.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests")]  # the DevTools helpers of the browser tests

import ledger  # noqa: E402
from ledger.demo import traces as syn  # noqa: E402
from ledger.store.series import CHART_COLUMNS  # noqa: E402


def build(path: Path, steps: int) -> float:
    """The ledger; returns the lowest throughput written (a stall)."""
    lg = ledger.open(path)
    try:
        lg.set_baseline(14_200.0, "tok/s")
        values, _ = syn.trace(
            steps, level=14_100.0, noise=0.03, phi=0.6, warmup=steps // 50,
            stalls=steps // 1000, seed=1,
        )  # fmt: skip
        chunk = 200_000
        for start in range(0, steps, chunk):
            rows = [
                {"step": start + i, "throughput": float(v), "tokens": 4096,
                 "step_time_s": 4096 / float(v), "loss": 4.0 / (1 + (start + i) / 1e5)}
                for i, v in enumerate(values[start : start + chunk])
            ]  # fmt: skip
            lg.add_steps("marathon", rows, throughput_unit="tok/s")
        return float(min(values))
    finally:
        lg.close()


def median_time(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]  # a callable, as every caller passes
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--width", type=int, default=1200)
    args = parser.parse_args()

    from browser import Browser, chromium_path
    from test_serve import origin, serving
    from test_serve_browser import Tab, drawn

    executable = chromium_path()
    if executable is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "ledger.db"
        start = time.perf_counter()
        lowest = build(db, args.steps)
        print(f"built {args.steps:,} steps in {time.perf_counter() - start:.1f} s")
        with ledger.open(db, create=False) as lg:
            columns = list(CHART_COLUMNS)
            lg.steps_frame("marathon", columns)  # warm the file cache
            read = median_time(lambda: lg.steps_frame("marathon", columns), args.repeat)
        with serving(str(db)) as url:
            base = origin(url)
            series_url = f"{base}/api/run/series?run=marathon&width={args.width}"

            def fetch() -> dict[str, object]:
                with urllib.request.urlopen(series_url, timeout=120) as response:
                    return dict(json.load(response))

            begin = time.perf_counter()
            served = fetch()  # the first: read from the database
            cold_series = time.perf_counter() - begin
            buckets = len(served["steps"])  # type: ignore[arg-type]
            low = served["columns"]["throughput"]["low"]  # type: ignore[index]
            assert buckets <= args.width, buckets
            assert min(v for v in low if v is not None) == lowest, "a stall was smoothed away"
            series = median_time(fetch, args.repeat)

            page = f"{base}/run?run=marathon"
            with Browser(executable) as browser:
                tab = Tab(browser, width=args.width + 40)
                cold_page = tab.open(page, drawn("run"), timeout=600)  # the analysis, why
                warm, whole = [], []
                for _ in range(args.repeat):
                    begin = time.monotonic()
                    tab.call("Page.navigate", url=page)
                    tab.wait(drawn("series"), timeout=600)
                    warm.append(time.monotonic() - begin)
                    tab.wait(drawn("run"), timeout=600)
                    whole.append(time.monotonic() - begin)
                errors = list(tab.report.console_errors)
                tab.open(base + "/", drawn("investigation"), timeout=600)
                live = []
                with ledger.open(db, create=False) as lg:
                    for i in range(args.repeat):
                        name = f"late_{i}"
                        before = tab.evaluate("window.ledgerServe.renders.investigation")
                        begin = time.monotonic()
                        lg.add_steps(name, [{"step": s, "throughput": 14_000.0} for s in range(50)])
                        tab.wait(
                            "Array.from(document.querySelectorAll('td.name')).some("
                            f"td => td.innerText === {json.dumps(name)})",
                            timeout=600,
                        )
                        live.append(time.monotonic() - begin)
                        tab.wait(drawn("investigation", before + 1), timeout=600)  # figures too
                tab.close()
            fresh = []
            for _ in range(max(1, args.repeat // 2)):
                begin = time.monotonic()
                with Browser(executable) as browser:
                    tab = Tab(browser, width=args.width + 40)
                    tab.open(page, drawn("series"), timeout=600)
                    fresh.append(time.monotonic() - begin)
                    tab.close()
    print(f"run of {args.steps:,} steps, charts {args.width} px wide ({buckets} buckets served)")
    print(f"  bulk read of the chart columns (reference) {read * 1000:8.0f} ms   1.00x")
    print(f"  /api/run/series, warm server               {series * 1000:8.0f} ms   "
          f"{series / read:.2f}x")  # fmt: skip
    print(f"  /api/run/series, the first (from the db)   {cold_series * 1000:8.0f} ms   "
          f"{cold_series / read:.2f}x")  # fmt: skip
    print(f"  whole run page, the first (analysis, why)  {cold_page * 1000:8.0f} ms")
    print(f"  run page drawn, warm tab (goal 1 s)        {statistics.median(warm) * 1000:8.0f} ms")
    print(f"  whole run page (analysis, why), warm tab   {statistics.median(whole) * 1000:8.0f} ms")
    print(f"  run page drawn, fresh chromium (goal 3 s)  {statistics.median(fresh) * 1000:8.0f} ms")
    print(f"  new run on the open page (goal 2 s)        {statistics.median(live) * 1000:8.0f} ms")
    print(f"  console errors: {errors or 'none'}")


if __name__ == "__main__":
    main()
