"""The HTML report in a real headless browser (Debian's chromium over DevTools): it loads
with no console error and no network request, every image decodes, and a hostile
hypothesis shows as text and runs nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser import Browser, chromium_path

from ledger.demo import run_demo

XSS = "<script>alert('script ran')</script><img src=x onerror=alert('handler ran')>"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = chromium_path()
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("CI must have chromium: .ci/run installs Debian's package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_the_demo_report_in_a_browser(chromium: str, tmp_path: Path) -> None:
    result = run_demo(tmp_path / "demo", say=lambda _: None)
    import ledger

    with ledger.open(result.db, create=False) as lg:
        lg.add_hypothesis(XSS)
        report = lg.write_report(tmp_path / "report.html")

    with Browser(chromium) as browser:
        page = browser.load(report)

    assert page.console_errors == []
    assert page.dialogs == []  # neither the <script> nor the onerror handler ran
    fetched = [u for u in page.requests if not u.startswith(("data:", report.as_uri()))]
    assert fetched == []  # nothing over the network, nothing else from disk
    assert len(page.images) == 4
    for image in page.images:
        assert image["complete"] and image["width"] > 0 and image["height"] > 0
    assert XSS in page.text  # the hypothesis is shown as the text it is
    assert "eager_dynamiccopy" in page.text and "DRIFT" in page.text
    (tmp_path / "report.png").write_bytes(page.screenshot_png)
    assert page.screenshot_png.startswith(b"\x89PNG")
