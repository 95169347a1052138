"""The command line's C heap (ledger.heap): freed blocks kept for the next ones, and
given back where a command lives on. Each case runs in a fresh interpreter: the settings
are the whole process's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

GLIBC = "CS_GNU_LIBC_VERSION" in os.confstr_names and os.confstr("CS_GNU_LIBC_VERSION").startswith(
    "glibc"
)
pytestmark = pytest.mark.skipif(not GLIBC, reason="ledger.heap tunes glibc's malloc only")

# 64 MiB blocks: past glibc's own largest threshold (32 MiB), so that without the
# settings each is a fresh mapping whatever came before
FAULTS = """
import resource, sys
import numpy as np
from ledger import heap
if sys.argv[1] == "kept":
    assert heap.keep_freed()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    block = np.ones(8 << 20)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

RESIDENT = """
import os, sys
import numpy as np
from ledger import heap, collector

def resident_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") >> 20

heap.give_back()  # before keep_freed: nothing to give back, nothing changed
assert heap.keep_freed()
low = resident_mib()
blocks = [np.ones(8 << 20) for _ in range(5)]  # 320 MiB, then freed: kept
del blocks
kept = resident_mib()
collector.settle()  # where a command lives on
print(low, kept, resident_mib())
"""


def run(code: str, *args: str) -> str:
    # numpy asks for huge pages for large arrays; off, a fault is one 4 KiB page
    env = {**os.environ, "NUMPY_MADVISE_HUGEPAGE": "0"}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def test_freed_blocks_serve_the_next_ones_without_page_faults() -> None:
    plain, kept = int(run(FAULTS, "plain")), int(run(FAULTS, "kept"))
    # every block faulted in afresh: 16,384 pages each, or 32 where the kernel gives huge
    # pages to every mapping (transparent huge pages "always")
    assert plain >= 20 * 32
    assert kept < plain / 5, (plain, kept)


def test_settling_gives_the_kept_memory_back() -> None:
    low, kept, settled = (int(v) for v in run(RESIDENT).split())
    assert kept - low > 250, (low, kept)  # freed, but kept in the heap
    assert kept - settled > 250, (kept, settled)  # returned to the system


def test_the_command_line_keeps_freed_blocks() -> None:
    code = (  # the command ends at once (ledger.shutdown), after atexit's handlers
        "import atexit, sys\n"
        "from ledger import heap\n"
        "import ledger.cli\n"
        "atexit.register(lambda: print('kept' if heap._kept else 'not kept', file=sys.stderr))\n"
        "sys.argv = ['ledger', '--help']\n"
        "ledger.cli.main()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stderr.strip().endswith("kept") and "not kept" not in done.stderr
