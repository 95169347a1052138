"""Where a `ledger` command's freed arrays go: kept for the next ones (glibc only).

glibc's malloc serves a block of 128 KiB or more from a mapping of its own and unmaps it
when the block is freed. It raises that threshold to the largest block freed so far, but
a block as large as that one still gets a fresh mapping. An analysis of a million steps
makes and frees a few hundred arrays of 8 MB, and every fresh mapping costs the kernel a
zeroed page at the first touch of each 4 KiB of it. A cold `ledger compare` of two
million-step runs took 53,000 page faults and 0.15-0.4 s of system time that way.

`keep_freed` (the command line's entry point) has malloc serve blocks up to 128 MiB from
its heap and keep up to 1 GiB of freed memory there for the next blocks. The same compare
then takes 40,000 faults and 0-13 % less CPU, the most when page faults are slowest
(benchmarks/bench_compare.py; docs/performance.md). `give_back`, called where a command
turns into one that lives on (ledger.collector.settle: a follower, a server, a launcher
waiting), gives glibc's settings back and returns what the heap kept to the system.

Elsewhere (macOS, musl, Windows) both do nothing. The library's users (the training
hook, notebooks) never go through `keep_freed`: their process's allocator is theirs.
"""

from __future__ import annotations

import os
from typing import Any

M_TRIM_THRESHOLD = -1  # mallopt's parameters (malloc.h)
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MIB = 1 << 20
KEPT = {M_MMAP_THRESHOLD: 128 * MIB, M_TRIM_THRESHOLD: 1024 * MIB, M_TOP_PAD: 64 * MIB}
GLIBC = {M_MMAP_THRESHOLD: 128 * 1024, M_TRIM_THRESHOLD: 128 * 1024, M_TOP_PAD: 128 * 1024}

_kept = False


def _libc() -> Any | None:
    """glibc's functions, or None where the C library is another one."""
    if "CS_GNU_LIBC_VERSION" not in os.confstr_names:
        return None
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION")
    except (OSError, ValueError):  # a confstr name this system's C library lacks
        return None
    if not version or not version.startswith("glibc"):
        return None
    import ctypes

    return ctypes.CDLL(None)


def keep_freed() -> bool:
    """Keep freed blocks in the heap for the next ones (see the module's docstring).
    True when the C library took the settings."""
    global _kept
    libc = _libc()
    if libc is None:
        return False
    # mallopt answers 1 when it took a setting: each is independent, and one refused
    # leaves malloc as it was for that one
    took = all([libc.mallopt(name, value) == 1 for name, value in KEPT.items()])
    _kept = True
    return took


def give_back() -> None:
    """glibc's own settings again, and the memory the heap kept returned (malloc_trim).
    Idempotent: a no-op unless keep_freed ran since."""
    global _kept
    if not _kept:
        return
    _kept = False
    libc = _libc()
    if libc is None:
        return
    for name, value in GLIBC.items():
        libc.mallopt(name, value)
    libc.malloc_trim(0)
