"""The words the front ends share: numbers as people read them, sentences about a verdict
and the baseline, text cut at a word. The analysis writes its own verdict sentences with
the same functions (ledger.analyze.wording), so they are defined there and named here for
the command line and `serve`, which import no analysis."""

from __future__ import annotations

from ledger.analyze.wording import baseline_sentence as baseline_sentence
from ledger.analyze.wording import p_text as p_text
from ledger.analyze.wording import pct as pct
from ledger.analyze.wording import short_value as short_value
from ledger.cleantext import cut_words as cut_words
