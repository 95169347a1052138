"""Events a log can tell: tracebacks, CUDA OOM, NCCL failures, recompilation limits,
signals and exit codes, warnings and errors, the end of training.

`hint(text)` is the cheap first test: one regex over the segment, so that the common
lines (step lines, bar states, chatter) cost almost nothing. `classify(text)` then
names the events a hinted line holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_TEXT = 1000

_HINT = re.compile(
    r"Traceback|[Ee]rror|ERROR|Exception|out of memory|OutOfMemory|NCCL|nccl|Watchdog"
    r"|[Rr]ecompil|cache_size_limit|recompile_limit|Killed|SIG[A-Z]{2,4}|Signal \d|got signal"
    r"|exitcode|exit code|exit status|exited with|return code|Segmentation fault|Aborted"
    r"|core dumped|Fatal|FATAL|[Ww]arning|WARN|train_runtime"
    r"|[Tt]raining (?:is )?(?:complete|finished|done)"
    r"|Finished training|Done training|fit` stopped|exits successfully|Materializing|Loading"
    r"|function: '|last reason:|CANCELLED"
)

_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|HIP out of memory"
    r"|XPU out of memory|CUBLAS_STATUS_ALLOC_FAILED"
)
_TRIED = re.compile(r"Tried to allocate (\d[\d.]*\s*[KMGT]?i?B)")
_OOM_GPU = re.compile(r"GPU (\d+)")
_NCCL = re.compile(
    r"Watchdog caught collective operation timeout|NCCL error|nccl\w*Error"
    r"|Some NCCL operations have failed|NCCL communicator was aborted|DistBackendError"
    r"|NCCL timeout|collective operation timeout"
)
_RECOMPILE = re.compile(
    r"hit config\.(?P<limit>recompile_limit|cache_size_limit) \((?P<n>\d+)\)"
    r"|(?P<fail>FailOnRecompileLimitHit)|Recompiling function (?P<fn>\S+)"
)
_FUNCTION = re.compile(r"function: '(?P<fn>[^']+)' \((?P<where>[^)]*)\)")
_LAST_REASON = re.compile(r"last reason: (?P<reason>.*)")
_EXITCODE = re.compile(r"exitcode\s*:\s*(?P<code>-?\d+)(?:.*?\(pid:\s*(?P<pid>\d+)\))?")
_RETURNCODE = re.compile(
    r"return code\s*=\s*(?P<code>-?\d+)"
    r"|exit(?:ed)? (?:with )?(?:exit )?(?:code|status)[ :=]*(?P<code2>-?\d+)"
)
_SIGNAL = re.compile(
    r"Signal (?P<num>\d+) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)"
    r"|Process (?P<pid2>\d+) got signal:? (?P<num2>\d+)"
)
_KILLED = re.compile(r"(?:^|[\s:])Killed(?:\s|$)")
_CRASH_SIGNAL = re.compile(
    r"Segmentation fault|Bus error|Aborted \(core dumped\)"
    r"|Fatal Python error: (?:Segmentation|Aborted|Bus)"
)
_SIGNAME = re.compile(r"\b(?P<name>SIGKILL|SIGTERM|SIGINT|SIGABRT|SIGSEGV|SIGBUS|SIGHUP)\b")
_CLOSING = re.compile(r"closing signal|Sending process \d+ closing")
_FINISHED = re.compile(
    r"\btrain_runtime\b|[Tt]raining (?:is )?(?:completed?|finished|done)\b|Finished training"
    r"|Done training|`Trainer\.fit` stopped|exits successfully"
)
_WARNING = re.compile(r"\bWARN(?:ING)?\b|[A-Za-z]*Warning\b|warnings\.warn")
_ERROR = re.compile(r"\bERROR\b|\bFATAL\b|\bCRITICAL\b|^[\w.]*(?:Error|Exception)(?::|$)")
# An exception's own line (`RuntimeError: CUDA error: …`), seen without its traceback
# (cut off by `tail -n 90`, or printed by a launcher): the run died of it unless it went on.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)(?::|$)")
_CANCELLED = re.compile(
    r"\bCANCELLED\b.*\bDUE TO\b|\*\*\* JOB \d+ ON \S+ CANCELLED|DUE TO PREEMPTION"
)
_LOADING = re.compile(r"^(?:Loading|Materializing)\b|\bMaterializing param")
EXCEPTION_LINE = re.compile(r"(?P<type>[A-Za-z_][\w.]*)(?::[ \t]?(?P<msg>.*))?")

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV",
           15: "SIGTERM"}  # fmt: skip
_KILLING = {"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"}
# Exceptions that end a run without being its cause: the launcher's wrapper, an interrupt.
WRAPPERS = ("ChildFailedError",)
INTERRUPTS = ("KeyboardInterrupt", "SignalException")


@dataclass
class Found:
    """One event in one segment. `effect` is what it means for the run's fate."""

    kind: str
    text: str
    effect: str | None = None  # oom, nccl, crashed, killed, exit_error, finished, loading
    key: tuple[object, ...] | None = None  # events with the same key are one event
    follow: bool = False  # details come on the next lines (a recompile's function, reason)


def hint(text: str) -> bool:
    return _HINT.search(text) is not None


def classify(text: str) -> list[Found]:
    """The events in one (hinted) segment, most specific first."""
    out: list[Found] = []
    short = text.strip()[:MAX_TEXT]
    if _OOM.search(text):
        detail = short
        tried = _TRIED.search(text)
        gpu = _OOM_GPU.search(text)
        if tried or gpu:
            bits = [
                f"tried to allocate {tried.group(1)}" if tried else "",
                f"GPU {gpu.group(1)}" if gpu else "",
            ]
            detail = (
                f"{short}"
                if len(short) < 300
                else f"CUDA out of memory ({', '.join(b for b in bits if b)})"
            )
        out.append(Found("oom", detail, "oom"))
        return out
    if _NCCL.search(text):
        out.append(Found("nccl", short, "nccl"))
    m = _RECOMPILE.search(text)
    if m is not None:
        if m.group("fail"):
            out.append(Found("recompile", short, "crashed"))
        elif m.group("limit"):
            text = f"{m.group('limit')} ({m.group('n')}) hit"
            out.append(Found("recompile", text, None, follow=True))
        else:
            out.append(Found("recompile", short, None))
    sig = _signal(text, short)
    if sig is not None:
        out.append(sig)
    if _FINISHED.search(text):
        out.append(Found("finished", short, "finished"))
    if out:
        return out
    if _LOADING.search(short):
        return [Found("loading", short, "loading")]
    if _ERROR.search(text):
        m = _EXCEPTION.match(short)
        if m is not None:
            base = short.split(":", 1)[0].rsplit(".", 1)[-1]
            effect = exception_effect(short.split(":", 1)[0], short)
            return [Found("error", short, None if base in WRAPPERS else effect)]
        return [Found("error", short, None)]
    if _WARNING.search(text):
        return [Found("warning", short, None)]
    return out


def _signal(text: str, short: str) -> Found | None:
    m = _EXITCODE.search(text)
    if m is not None:
        return _from_code(int(m.group("code")), m.group("pid"), short)
    m = _SIGNAL.search(text)
    if m is not None:
        num = int(m.group("num") or m.group("num2"))
        pid = m.group("pid") or m.group("pid2")
        name = SIGNALS.get(num, f"signal {num}")
        return Found("signal", short, _signal_effect(name), ("signal", num, pid))
    m = _RETURNCODE.search(text)
    if m is not None:
        return _from_code(int(m.group("code") or m.group("code2")), None, short)
    if _CANCELLED.search(text):  # Slurm's time limit or preemption
        return Found("signal", short, "killed")
    if _CRASH_SIGNAL.search(text):
        return Found("signal", short, "crashed")
    if _KILLED.search(text):
        return Found("signal", short, "killed")
    m = _SIGNAME.search(text)
    if m is not None:
        if _CLOSING.search(text):  # torchrun tearing down the other workers: a consequence
            return Found("signal", short, None)
        return Found("signal", short, _signal_effect(m.group("name")))
    return None


def _from_code(code: int, pid: str | None, short: str) -> Found:
    if code < 0:
        name = SIGNALS.get(-code, f"signal {-code}")
        return Found("signal", short, _signal_effect(name), ("signal", -code, pid))
    return Found("exit", short, "exit_error" if code else "exit_ok", ("exit", code, pid))


def _signal_effect(name: str) -> str:
    return "killed" if name in _KILLING else "crashed"


def recompile_detail(text: str) -> tuple[str, str] | None:
    """(`function`, text) or (`reason`, text) from the lines after a recompile warning."""
    m = _FUNCTION.search(text)
    if m is not None:
        return "function", f"function '{m.group('fn')}' ({m.group('where')})"
    m = _LAST_REASON.search(text)
    if m is not None:
        return "reason", m.group("reason").strip()[:300]
    return None


def exception_effect(exc_type: str, message: str) -> str | None:
    """What an exception that ended a traceback means for the run."""
    base = exc_type.rsplit(".", 1)[-1]
    if base in WRAPPERS:
        return None
    if base in INTERRUPTS:
        return "killed"
    if _OOM.search(exc_type) or _OOM.search(message):
        return "oom"
    if _NCCL.search(exc_type) or _NCCL.search(message):
        return "nccl"
    return "crashed"
