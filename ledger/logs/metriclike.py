"""Does a line the reader did not read look like metrics? The honest half of the reader.

A reader can never know every shape; what it must never do is say it read everything when
it did not. A line that no stage turned into a step, and that looks like metrics, is
counted as unread (`unread_lines`) and shown, so that a person can teach the reader its
shape (`ledger pattern add …`). It looks like metrics when:

- numbers stand next to metric words (loss, lr, acc, grad, ppl, tok/s, it/s, samples,
  throughput, mfu…): at least one such measurement and two numbered words in all
  (`epoch 3 ... loss 2.3`), quoted or not (`"loss": "2.3"` in a JSON object);
- or it is a row of numbers under a header of names that holds a metric word (a table).

A step counter alone (`saving checkpoint at step 100`) is not metrics, nor is a single
`key value` (a config line).
"""

from __future__ import annotations

import re

from ledger.logs.numbers import NUM

# Words that name a measurement of training, and words that count where it is.
_MEASURE = (
    r"loss|lr|learning[ _]?rate|acc(?:uracy)?|grad(?:_?norm)?|ppl|perplexity|mfu|tflops?"
    r"|throughput|samples?(?:/s|/sec|_per_s\w*)?|tok(?:en)?s?(?:/s|/sec|_per_s\w*)?|wps"
    r"|it/s|s/it|ms/step|rate|mAP\w*|f1|bleu|rouge\w*|xent|nll"
)
_COUNT = r"epoch|step|iter(?:ation)?|batch|update"
_WORD = rf"(?:[A-Za-z_]\w*[_/.\-])*(?:{_MEASURE}|{_COUNT})(?:[_/.\-]\w+)*"
# `loss: 2.3`, `loss=2.3`, `"loss": "2.3"`, `loss 2.3`; and `2.3 loss`, `123 tok/s` after.
_BEFORE = re.compile(
    rf"(?<![\w])(?P<word>{_WORD})(?:[^\w.+\-\n]|->){{0,4}}(?P<num>{NUM})(?![A-Za-z_])",
    re.IGNORECASE,
)
_AFTER = re.compile(
    rf"(?<![\w.])(?P<num>{NUM})[kKMGT]?[^\w.+\-\n]{{0,3}}(?P<word>{_MEASURE})(?![A-Za-z])",
    re.IGNORECASE,
)
_MEASURE_WORD = re.compile(rf"(?:{_MEASURE})", re.IGNORECASE)
_HEADER_CELL = re.compile(r"[A-Za-z_][\w./()%\-]*")
_ROW_CELL = re.compile(rf"(?:{NUM}|\d+/\d+)[A-Za-z%]{{0,3}}|[-:.\d]+")
MAX_LOOK = 4000  # past this, a line is measured by its first characters


def pairs(line: str) -> tuple[int, int]:
    """(numbered metric words, of which measurements) on the line."""
    text = line[:MAX_LOOK]
    spans: list[tuple[int, int]] = []
    measured = 0
    for m in _BEFORE.finditer(text):
        spans.append(m.span("num"))
        if _MEASURE_WORD.fullmatch(_last_part(m.group("word"))) or _MEASURE_WORD.search(
            m.group("word")
        ):
            measured += 1
    found = len(spans)
    for m in _AFTER.finditer(text):
        if not any(s < m.end("num") and m.start("num") < e for s, e in spans):
            found += 1
            measured += 1
    return found, measured


def _last_part(word: str) -> str:
    return re.split(r"[_/.\-]", word)[-1]


def looks_like_metrics(line: str) -> bool:
    """Numbers next to metric words: one measurement, two numbered words in all."""
    found, measured = pairs(line)
    return measured >= 1 and found >= 2


def header_width(line: str) -> int:
    """The number of columns when `line` is a table header naming a metric (`epoch
    train_loss valid_loss accuracy time`), else 0."""
    cells = _cells(line)
    if not 2 <= len(cells) <= 64 or not all(_HEADER_CELL.fullmatch(c) for c in cells):
        return 0
    if not any(_MEASURE_WORD.search(c) or re.search(_COUNT, c, re.I) for c in cells):
        return 0
    return len(cells)


def is_row(line: str, width: int) -> bool:
    """A row of numbers that a header of `width` columns may head."""
    cells = _cells(line)
    if len(cells) < 2 or abs(len(cells) - width) > 2:
        return False
    numbers = sum(1 for c in cells if _ROW_CELL.fullmatch(c))
    return numbers >= 2 and numbers * 2 >= len(cells)


def _cells(line: str) -> list[str]:
    text = line.strip().strip("|").strip()
    if "|" in text:
        return [c.strip() for c in text.split("|") if c.strip()]
    if "," in text and " " not in text.replace(", ", ","):
        return [c.strip() for c in text.split(",") if c.strip()]
    return text.split()


_SUGGEST_NUM = re.compile(rf"{NUM}")
_NAME_BEFORE = re.compile(r"([A-Za-z_][\w/]*)[^\w.+\-\n]{0,4}$")
_NAME_AFTER = re.compile(r"^[kKMGT]?[^\w.+\-\n]{0,3}([A-Za-z_][\w/]*)")
_GROUP_NUM = r"[-+]?[\d.,]+(?:[eE][-+]?\d+)?"


def suggest(line: str) -> str:
    """A `ledger pattern add` regex for an unread line: its text, each number a named group
    (`step`, `epoch`, `loss`, `throughput`, else the word beside it), so that a person
    starts from something that reads the line."""
    from ledger.logs.keys import normalize

    text = line.strip()[:MAX_LOOK]
    parts: list[str] = []
    used: set[str] = set()
    pos = 0
    for m in _SUGGEST_NUM.finditer(text):
        if not m.group()[-1:].isdigit():
            continue  # nan, inf: literal text
        before = _NAME_BEFORE.search(text, 0, m.start())
        after = _NAME_AFTER.match(text[m.end() :])
        word = before.group(1) if before else (after.group(1) if after else "")
        name = _group_name(normalize(word), used)
        parts.append(_literal(text[pos : m.start()]))
        parts.append(f"(?P<{name}>{_GROUP_NUM})" if name else _GROUP_NUM)
        pos = m.end()
    parts.append(_literal(text[pos:]))
    return "".join(parts)


def _group_name(word: str, used: set[str]) -> str:
    if not word:
        return ""
    lower = word.lower()
    if re.fullmatch(r"(?:global_)?(?:step|iter|iteration|it|update)s?", lower):
        name = "step"
    elif lower in ("ep", "epoch", "epochs"):
        name = "epoch"
    elif "loss" in lower and not lower.startswith(("val", "eval", "test")):
        name = "loss"
    elif re.search(r"tok|sample|it_s|wps|throughput", lower):
        name = "throughput"
    else:
        name = re.sub(r"\W", "_", lower)
        if not re.fullmatch(r"[a-z_]\w{0,30}", name):
            return ""
    if name in used:
        return ""
    used.add(name)
    return name


def _literal(text: str) -> str:
    return re.sub(r"(?:\\ )+|\s+", r"\\s*", re.escape(text))
