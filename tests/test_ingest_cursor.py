"""The cursor of an ingest: where a log goes on from, and when it starts again (a file
shorter than the offset was truncated, one with other first bytes was replaced)."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ledger.store.cursor import Cursor, PrefixCache

HEAD = b"step 1 | loss 2.0 | tok/s 100\nstep 2 | loss 1.9 | tok/s 101\n"
MORE = b"step 3 | loss 1.8 | tok/s 102\n"


def _row(offset: int, data: bytes, id: int = 1) -> Any:
    """A log_file row as the cursor reads it: the offset reached and the hash before it."""
    return SimpleNamespace(id=id, offset=offset, sha256=hashlib.sha256(data[:offset]).hexdigest())


def _at(file: Path, row: Any, *, packed: bool = False, cache: PrefixCache | None = None) -> Cursor:
    return Cursor.of(row, file, file.stat(), packed=packed, cache=cache)


def test_a_new_log_is_read_from_the_start(tmp_path: Path) -> None:
    file = tmp_path / "train.log"
    file.write_bytes(HEAD)
    cursor = _at(file, SimpleNamespace(id=1, offset=0, sha256=None))
    assert (cursor.offset, cursor.reset) == (0, None)
    assert cursor.sha256 == hashlib.sha256(b"").hexdigest()


def test_an_appended_log_goes_on_from_its_offset(tmp_path: Path) -> None:
    file = tmp_path / "train.log"
    file.write_bytes(HEAD + MORE)
    cursor = _at(file, _row(len(HEAD), HEAD))
    assert (cursor.offset, cursor.reset) == (len(HEAD), None)
    # the running digest goes on: fed the appended bytes, it is the whole file's hash
    cursor.digest.update(MORE)
    cursor.advance(len(HEAD + MORE))
    assert cursor.offset == len(HEAD + MORE)
    assert cursor.sha256 == hashlib.sha256(HEAD + MORE).hexdigest()


def test_a_shorter_file_was_truncated(tmp_path: Path) -> None:
    file = tmp_path / "train.log"
    file.write_bytes(HEAD[:10])
    cursor = _at(file, _row(len(HEAD), HEAD))
    assert (cursor.offset, cursor.reset) == (0, "truncated")
    assert cursor.sha256 == hashlib.sha256(b"").hexdigest()


def test_other_first_bytes_mean_a_replaced_file(tmp_path: Path) -> None:
    file = tmp_path / "train.log"
    file.write_bytes(HEAD.replace(b"loss 2.0", b"loss 3.0") + MORE)  # as long, or longer
    cursor = _at(file, _row(len(HEAD), HEAD))
    assert (cursor.offset, cursor.reset) == (0, "replaced")


def test_a_gzip_log_is_compared_by_its_text(tmp_path: Path) -> None:
    file = tmp_path / "train.log.gz"
    text = HEAD * 50  # compresses far below its length: the offset passes the file's size
    file.write_bytes(gzip.compress(text + MORE))
    assert len(text) > file.stat().st_size
    cursor = _at(file, _row(len(text), text), packed=True)
    assert (cursor.offset, cursor.reset) == (len(text), None)
    other = (HEAD * 49) + HEAD.replace(b"2.0", b"2.5")
    cursor = _at(file, _row(len(other), other), packed=True)
    assert cursor.reset == "replaced"


def test_a_followers_cache_spares_the_hash_but_not_the_check(tmp_path: Path) -> None:
    file = tmp_path / "train.log"
    file.write_bytes(HEAD)
    row, cache = _row(len(HEAD), HEAD), PrefixCache()
    cache.remember(row, file, file.stat().st_ino, hashlib.sha256(HEAD))
    file.write_bytes(HEAD + MORE)
    cursor = _at(file, row, cache=cache)
    assert (cursor.offset, cursor.reset) == (len(HEAD), None)
    cursor.digest.update(b"x")  # the cursor's digest is a copy: the cache's is untouched
    assert _at(file, row, cache=cache).sha256 == row.sha256
    # The same inode rewritten with other first bytes: the cache is not believed.
    with file.open("r+b") as handle:
        handle.write(b"STEP")
    assert _at(file, row, cache=cache).reset == "replaced"


def test_restarting_keeps_the_first_reason() -> None:
    cursor = Cursor(offset=120, reset=None)
    cursor.restart("reread")
    assert (cursor.offset, cursor.reset) == (0, "reread")
    cursor = Cursor(reset="truncated")
    cursor.restart("reread")
    assert cursor.reset == "truncated"


def test_ingest_says_each_reset(lg: Any, tmp_path: Path) -> None:
    """Through the ledger: append reads only what is new, truncation and replacement read
    again from the start (into a new launch)."""
    file = tmp_path / "train_cursor.log"
    file.write_bytes(HEAD)
    first = lg.ingest(file)
    assert (first.reset, first.read_bytes, first.steps) == (None, len(HEAD), 2)
    file.write_bytes(HEAD + MORE)
    appended = lg.ingest(file)
    assert (appended.reset, appended.read_bytes, appended.steps) == (None, len(MORE), 1)
    file.write_bytes(HEAD)
    truncated = lg.ingest(file)
    assert (truncated.reset, truncated.read_bytes) == ("truncated", len(HEAD))
    assert truncated.launch == appended.launch + 1
    file.write_bytes(HEAD.replace(b"tok/s 100", b"tok/s 900"))
    replaced = lg.ingest(file)
    assert (replaced.reset, replaced.launch) == ("replaced", truncated.launch + 1)
    assert lg.ingest(file).reset is None  # read to its end: nothing to start again
