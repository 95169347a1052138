"""Example data with a known truth: the demo investigation behind `ledger demo`, the
realistic logs it writes (ledger.demo.logs), and throughput traces with a planted truth
for tests and benchmarks (ledger.demo.traces)."""

from __future__ import annotations

from ledger.demo.investigation import FAKE_TOKEN, DemoResult, run_demo

__all__ = ["FAKE_TOKEN", "DemoResult", "run_demo"]
