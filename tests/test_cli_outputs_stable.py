"""The CLI's read commands say the same bytes on the demo ledger, whatever the code under
them becomes.

The golden files under tests/fixtures/cli_outputs/ were written by the code as it stood
before the use-case layer was split out of the store; a refactor must leave every one of
them unchanged. Only what genuinely differs between two builds of the demo is normalised
(`normalise`): the folder the demo was built in and the wall-clock times its rows were
written at. Everything else — every number, word, space and column width — is compared
byte for byte.

To write the goldens again, run this file with LEDGER_REGENERATE_GOLDENS=1. Do not do it
to make a failure go away: a golden that changes is a change of behaviour, and the diff of
the goldens is then the thing to review (and to justify in the commit that changes them).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import run_cli

from ledger.demo import run_demo

GOLDENS = Path(__file__).parent / "fixtures" / "cli_outputs"
REGENERATE = os.environ.get("LEDGER_REGENERATE_GOLDENS") == "1"
# The demo is built in a folder whose path has this many characters, so that table
# columns sized by a path are as wide in every build, and the placeholder that replaces it
# has the same length.
ROOT_CHARS = 96
# to the second or the microsecond, with or without a zone; or to the minute (the report's
# "drawn at" line)
TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:[+-]\d{2}:\d{2}|Z)?"
)
# a probe's time of day, to the minute, on the report's cards ("probe 04:20: …"); bare
# times elsewhere are left alone: a log's progress bar prints "04:35" too
CLOCK = re.compile(r"(?<=probe )(?:[01]\d|2[0-3]):[0-5]\d(?=: )")
SLACK = timedelta(seconds=5)

pytestmark = [pytest.mark.slow, pytest.mark.sqlite_only]


@dataclass(frozen=True)
class Demo:
    root: Path  # where the demo was built (ROOT_CHARS long)
    started: datetime  # the wall clock (UTC) before the build


def _placeholder(length: int) -> str:
    return "<DEMO>".ljust(length, "_")


def _written_since(text: str, demo: Demo) -> bool:
    """Whether a timestamp is a wall-clock time of this test's own (UTC or local): from
    the start of the build until now. A time to the minute counts from its minute."""
    try:
        value = datetime.fromisoformat(text.replace(" ", "T").replace("Z", "+00:00"))
    except ValueError:
        return False
    if value.tzinfo is None:
        # naive: the CLI's local time, or a UTC time stored without its zone
        candidates = [value.astimezone(UTC), value.replace(tzinfo=UTC)]
    else:
        candidates = [value]
    earliest = demo.started - SLACK - (timedelta(minutes=1) if text.count(":") == 1 else SLACK)
    latest = datetime.now(UTC) + SLACK
    return any(earliest <= c <= latest for c in candidates)


def normalise(text: str, demo: Demo) -> str:
    """Replace what genuinely varies between two builds of the demo, keeping every length:

    - the folder the demo was built in → `<DEMO>___…` of the same length (so a table
      sized by a path stays as wide);
    - a timestamp of the test's own wall clock, from the start of the build until now (a
      row's created_at, a deploy's started_at, the report's drawing time; local time or
      UTC) → the same text with its digits turned to `9`s. Timestamps from the demo's
      logs (fixed dates in the past) fall outside that window and stay as they are;
    - a probe's time of day on the report's cards, inside that window → `99:99`.
    """
    root = str(demo.root)
    text = text.replace(root, _placeholder(len(root)))

    def stamp(match: re.Match[str]) -> str:
        found = match.group(0)
        return re.sub(r"\d", "9", found) if _written_since(found, demo) else found

    text = TIMESTAMP.sub(stamp, text)
    minutes = _minutes_since(demo)
    return CLOCK.sub(lambda m: "99:99" if m.group(0) in minutes else m.group(0), text)


def _minutes_since(demo: Demo) -> set[str]:
    """Every HH:MM from the start of the build until now, in local time and in UTC."""
    found = set()
    at, end = demo.started - timedelta(minutes=1), datetime.now(UTC) + SLACK
    while at <= end + timedelta(minutes=1):
        found.update({at.strftime("%H:%M"), at.astimezone().strftime("%H:%M")})
        at += timedelta(minutes=1)
    return found


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    base = tmp_path_factory.mktemp("stable")
    padding = ROOT_CHARS - len(str(base)) - 1
    if padding < 1:
        pytest.skip(f"the temporary folder's path is over {ROOT_CHARS - 2} characters")
    root = base / ("d" * padding)
    started = datetime.now(UTC)
    run_demo(root, say=lambda _: None)
    return Demo(root, started)


@pytest.fixture
def here(demo: Demo, monkeypatch: pytest.MonkeyPatch) -> Demo:
    """The demo, with its folder the working directory and its ledger the one in use."""
    monkeypatch.chdir(demo.root)
    monkeypatch.setenv("LEDGER_DB", str(demo.root / ".ledger" / "ledger.db"))
    return demo


READ_COMMANDS: dict[str, list[str]] = {
    "runs": ["runs"],
    "runs.json": ["runs", "--json"],
    "timeline": ["timeline"],
    "timeline.json": ["timeline", "--json"],
    "hypotheses": ["hypothesis", "list"],
    "hypotheses.json": ["hypothesis", "list", "--json"],
    "baseline": ["baseline"],
    "baseline.json": ["baseline", "--json"],
    "patterns": ["pattern", "list"],
    "db_current": ["db", "current"],
    "compare": ["compare", "eager_unpadded", "eager_dynamiccopy"],
    "compare.json": ["compare", "eager_unpadded", "eager_dynamiccopy", "--json"],
    "compare_regression": ["compare", "baseline", "compiled"],
    "compare_three": ["compare", "baseline", "compiled", "eager_bufcache"],
    "compare_three.json": ["compare", "baseline", "compiled", "eager_bufcache", "--json"],
    "compare_own_baseline": ["compare", "eager_restored", "--baseline", "11000"],
    "why_compiled": ["why", "compiled"],
    "why_compiled.json": ["why", "compiled", "--json"],
    "why_bufcache": ["why", "eager_bufcache", "--against", "baseline"],
    "why_bufcache.json": ["why", "eager_bufcache", "--against", "baseline", "--json"],
    "parse": ["parse", "box/train_eager_bufcache.log"],
    "parse.json": ["parse", "box/train_eager_bufcache.log", "--json"],
}
RUNS = [
    "baseline",
    "compiled",
    "eager_restored",
    "eager_unpadded",
    "eager_bufcache",
    "eager_dynamiccopy",
]
for _run in RUNS:
    READ_COMMANDS[f"show_{_run}"] = ["show", _run]
    READ_COMMANDS[f"show_{_run}.json"] = ["show", _run, "--json"]


def _check(name: str, text: str) -> None:
    golden = GOLDENS / f"{name}.txt"
    if REGENERATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text, encoding="utf-8")
        return
    assert golden.is_file(), f"{golden.name} is missing (LEDGER_REGENERATE_GOLDENS=1 writes it)"
    assert text == golden.read_text(encoding="utf-8"), f"{name}: the output changed"


def _said(args: list[str], demo: Demo) -> str:
    result = run_cli(*args)
    return normalise(
        f"exit {result.exit_code}\n--- stdout\n{result.stdout}--- stderr\n{result.stderr}", demo
    )


@pytest.mark.parametrize("name", sorted(READ_COMMANDS))
def test_a_read_command_says_the_same_bytes(here: Demo, name: str) -> None:
    _check(name, _said(READ_COMMANDS[name], here))


def _html_text(html: str) -> str:
    """The page with its embedded figures left out: a PNG's bytes may differ between
    matplotlib builds, the page around them must not."""
    return re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:image/png;base64,…", html)


def test_the_report_says_the_same_words(here: Demo) -> None:
    demo = here
    out = demo.root / "stable_report.html"
    said = _said(["report", "--out", str(out)], demo)
    said_json = _said(["report", "--out", str(out), "--json"], demo)
    _check("report", said)
    _check("report.json", said_json)
    _check("report.html", normalise(_html_text(out.read_text(encoding="utf-8")), demo))
    png = demo.root / "stable_report.png"
    _check("report_png", _said(["report", "--out", str(png)], demo))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_normalise_keeps_what_does_not_vary(tmp_path: Path) -> None:
    now = datetime.now(UTC)
    demo = Demo(tmp_path, now)
    local = now.astimezone().strftime("%Y-%m-%d %H:%M:%S")
    minute = now.strftime("%Y-%m-%d %H:%M")
    text = (
        f"{tmp_path}/box/a.log at {local}, drawn {minute} UTC, "
        "logged 2026-11-28 09:00:00, 12,230 tok/s"
    )
    said = normalise(text, demo)
    assert str(tmp_path) not in said and len(said) == len(text)
    assert "at 9999-99-99 99:99:99, drawn 9999-99-99 99:99 UTC" in said
    assert normalise(f"probe {now.astimezone().strftime('%H:%M')}: x", demo) == "probe 99:99: x"
    assert "logged 2026-11-28 09:00:00, 12,230 tok/s" in said  # the log's own time stays
