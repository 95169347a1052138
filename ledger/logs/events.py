"""Events a log can tell: tracebacks, CUDA OOM, NCCL failures, recompiles and graph
breaks, signals and exit codes, Slurm cancellations, warnings and errors, the end of
training, a new run starting, and the chatter of a run that is still loading.

`hint(text)` is the cheap first test: one regex over the line, so that the common lines
(step lines, bar states) cost almost nothing. `classify(text)` then names the events a
hinted line holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ledger.model.terms import EventKind as K
from ledger.model.terms import LogEffect as E
from ledger.model.terms import OpenRecord

MAX_TEXT = 1000

_HINT = re.compile(
    r"Traceback|[Ee]rror|ERROR|Exception|out of memory|OutOfMemory|NCCL|nccl|Watchdog"
    r"|[Rr]ecompil|cache_size_limit|recompile_limit|Graph break|Killed|SIG[A-Z]{2,4}|Signal \d"
    r"|got signal|exitcode|exit code|exit status|exited with|return code|Segmentation fault"
    r"|Aborted|core dumped|Fatal|FATAL|[Ww]arning|WARN|train_runtime|[Tt]raining"
    r"|[Ff]inished|Done training|fit` stopped|exits successfully|final (?:checkpoint|model)"
    r"|CANCELLED|DUE TO|[Rr]estart|[Rr]esuming|End of|OMP_NUM_THREADS|Running training"
    r"|elastic_operator|[Rr]elaunch|Run summary|RESOURCE_EXHAUSTED|terminate called"
    r"|illegal memory access|device-side assert|c10::|[Ss]ignal[ :]+\d|Signals\.|Terminated"
    r"|[Ee]arly[ _-]?[Ss]top|Signaling Trainer|[Tt]otal (?:\w+ )?time|completed? in "
    r"|[Ee]xception in thread|[Uu]n(?:caught|handled) exception"
)
_OOM = re.compile(
    r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|HIP out of memory"
    r"|XPU out of memory|CUBLAS_STATUS_ALLOC_FAILED|MPS backend out of memory"
    r"|RESOURCE_EXHAUSTED: Out of memory|Out of memory while trying to allocate"
    r"|OOM when allocating tensor|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation"
)
_TRIED = re.compile(r"Tried to allocate (\d[\d.]*\s*[KMGT]?i?B)")
_OOM_GPU = re.compile(r"GPU (\d+)")
_ALLOCATED = re.compile(r"(\d[\d.]*\s*[KMGT]?i?B) is allocated by PyTorch")
_UNALLOCATED = re.compile(r"(\d[\d.]*\s*[KMGT]?i?B) is reserved by PyTorch but unallocated")
_NCCL = re.compile(
    r"Watchdog caught collective operation timeout|NCCL error|nccl\w*Error"
    r"|Some NCCL operations have failed|NCCL communicator was aborted|DistBackendError"
    r"|NCCL timeout|collective operation timeout|NCCL WARN .*(?:timeout|[Ee]rror)"
    r"|ProcessGroupNCCL.*(?:timed out|[Ee]xception)"
)
_WORK = re.compile(r"WorkNCCL\((?P<work>(?:[^()]|\([^()]*\))*)\)")
_RAN_FOR = re.compile(r"ran for (?P<ms>\d+) milliseconds")
_RANK_OF = re.compile(r"\[(?:PG[^\]]*)?Rank (\d+)\]")
_RECOMPILE = re.compile(
    r"hit config\.(?P<limit>recompile_limit|cache_size_limit) \((?P<n>\d+)\)"
    r"|(?P<fail>FailOnRecompileLimitHit)|Recompiling function (?P<fn>\S+)(?: in (?P<at>\S+))?"
)
_GRAPH_BREAK = re.compile(r"Graph break(?: in user code)?(?: at (?P<at>\S+))?")
_FUNCTION = re.compile(r"function: '(?P<fn>[^']+)' \((?P<where>[^)]*)\)")
_LAST_REASON = re.compile(r"last reason: (?P<reason>.*)")
_GUARD = re.compile(r"^\s*-\s*(?:\d+/\d+:\s*)?(?P<guard>\S.*)")
_REASON = re.compile(r"^\s*Reason:\s*(?P<reason>.*)")
_EXITCODE = re.compile(r"exitcode\s*:\s*(?P<code>-?\d{1,6})(?:.*?\(pid:\s*(?P<pid>\d+)\))?")
_RETURNCODE = re.compile(
    r"return code\s*=\s*(?P<code>-?\d{1,6})"
    r"|exit(?:ed)? (?:with )?(?:exit )?(?:code|status)[ :=]*(?P<code2>-?\d{1,6})"
)
_SIGNAL = re.compile(
    r"Signal (?P<num>\d{1,3}) \((?P<name>SIG\w+)\) received by PID (?P<pid>\d+)"
    r"|Process (?P<pid2>\d+) got signal:? (?P<num2>\d{1,3})"
)
_KILLED = re.compile(r"(?:^|[\s:])Killed(?:\s|$)")
_CRASH_SIGNAL = re.compile(
    r"Segmentation fault|Bus error|Aborted \(core dumped\)"
    r"|Fatal Python error: (?:Segmentation|Aborted|Bus)"
)
# A launcher's word that its workers got a signal: torchrun/elastic (`Received
# Signals.SIGTERM death signal`), `received signal 15`, mpirun's `exited on signal 9`,
# Slurm's `srun: error: node1: task 0: Terminated`, Lightning's `Received SIGTERM: 15`.
_LAUNCHER_SIGNAL = re.compile(
    r"(?:[Rr]eceived|[Cc]aught|got|exited on|killed by|died with|terminated by)"
    r" (?:the )?(?:death )?[Ss]ignal[:\s]*(?:<?Signals\.\w+:\s*)?(?P<num>\d{1,3})"
    r"|[Ss]ignal (?P<num2>\d{1,3}) (?:received|caught)"
    r"|\btask \d+: (?P<word>Terminated|Killed)\b|^(?P<bare>Terminated)\s*$"
)
# A C++ abort: what std::terminate prints, c10 and CUDA errors (an illegal memory access,
# a device-side assert), with no Python traceback around them.
_ABORT = re.compile(
    r"CUDA error: |illegal memory access|device-side assert|cudaError\w+|CUDA_ERROR_\w+"
    r"|terminate called after throwing|terminate called without an active exception"
    r"|\bc10::\w*Error\b|what\(\):"
)
_ABORT_TELLING = re.compile(r"CUDA error|illegal memory|device-side|cudaError|CUDA_ERROR|what\(\)")
# An exception no one caught, in a worker thread or reported by the trainer.
_UNCAUGHT = re.compile(r"^Exception in thread \S+|[Uu]n(?:caught|handled) exception")
_SIGNAME = re.compile(r"\b(?P<name>SIGKILL|SIGTERM|SIGINT|SIGABRT|SIGSEGV|SIGBUS|SIGHUP)\b")
_CLOSING = re.compile(r"closing signal|Sending process \d+ closing")
_FINISHED = re.compile(
    r"\btrain_runtime\b|[Tt]raining (?:is )?(?:completed?|finished|done|ended)\b"
    r"|Finished training|Done training|`Trainer\.fit` stopped|exits successfully"
    r"|\b[Ee]nd of training\b|[Ss]aving (?:the )?final (?:checkpoint|model)|done training"
    r"|[Tt]raining (?:run )?complete\b|[Tt]otal training time|wandb: Run summary"
    r"|[Ee]arly[ _-]?[Ss]topping\b(?![(.])"
    r"(?!\s*(?:callback|patience|=|:|mode|monitor|with|is|enabled|after|counter))"
    r"|[Ee]arly[ _-]?stopped|Signaling Trainer to stop|\bepochs? completed in\b"
    r"|^\W*(?:[Tt]otal (?:training |train |run |wall )?time|[Tt]raining time|[Tt]ime elapsed)"
    r"\s*(?:\(\w+\))?\s*[:=]?\s*[\d:.]+\s*(?:[a-z]{1,7}\s*)?$"
    r"|[Tt]raining complete in\b"
)
_TEST_SUMMARY = re.compile(
    r"\b(?:[Tt]est|TEST)(?: set)?[ _](?:metric|results?|loss|acc(?:uracy)?|ppl|perplexity)\b"
    r"|\|\s*test\s*\||\bfinal (?:eval|evaluation|test)\b"
)
_WARNING = re.compile(r"\bWARN(?:ING)?\b|[A-Za-z]*Warning\b|warnings\.warn")
_ERROR = re.compile(r"\bERROR\b|\bFATAL\b|\bCRITICAL\b|^[\w.]*(?:Error|Exception)(?::|$)")
# An exception's own line (`RuntimeError: CUDA error: …`), seen without its traceback
# (cut off by `tail -n 90`, or printed by a launcher): the run died of it unless it went on.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)(?::|$)")
_CANCELLED = re.compile(
    r"\bCANCELLED\b.*\bDUE TO\b|\*\*\* (?:JOB|STEP) [\d.]+ ON \S+ CANCELLED|DUE TO PREEMPTION"
    r"|DUE TO TIME LIMIT"
)
_RESTART = re.compile(
    r"will restart worker group|[Rr]estarting (?:workers|worker group|training|the run)"
    r"|[Rr]esuming (?:training )?from (?:a |the )?checkpoint|[Rr]esuming training"
    r"|\*{5} Running training \*{5}|Starting elastic_operator|[Rr]elaunching"
    r"|Setting OMP_NUM_THREADS environment variable"
)
EXCEPTION_LINE = re.compile(r"(?P<type>[A-Za-z_][\w.]*)(?::[ \t]?(?P<msg>.*))?")
# The chatter of a run that has not started training: library patches, model summaries,
# parameter counts, config dumps, datasets being built, weights loading.
_INIT = re.compile(
    r"^(?:Loading|Materializing|Patching|Building|Initiali[sz]|Preparing|Downloading|Tokeniz"
    r"|Creating|Setting up|Instantiating|Compiling|Resolving|Generating|Constructing|Using "
    r"(?:device|the|a|\w+ backend)|Model summary|Total params|Trainable params"
    r"|Non-trainable params|Namespace\(|TrainingArguments\(|GPU available|TPU available"
    r"|LOCAL_RANK|\|\s*Name\s*\|\s*Type|Map(?: \(num_proc=\d+\))?:|Found \d+ (?:files|GPUs?))"
    r"|\b(?:number of (?:parameters|params)|num(?:ber)?[ _]params|model parameters"
    r"|[Mm]aterializing param|building (?:the )?(?:dataset|model|tokenizer)"
    r"|[Ll]oading (?:checkpoint|weights|model|dataset|data|tokenizer)|torch\.compile)"
)

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV",
           15: "SIGTERM"}  # fmt: skip
_KILLING = {"SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"}
# Exceptions that end a run without being its cause: the launcher's wrapper, an interrupt.
WRAPPERS = ("ChildFailedError",)
INTERRUPTS = ("KeyboardInterrupt", "SignalException")
# Phrases that still name their event when the last line is cut short.
_CUT = (
    ("CUDA out of memory", K.OOM, E.OOM),
    ("OutOfMemoryError", K.OOM, E.OOM),
    ("Watchdog caught collective operation timeout", K.NCCL, E.NCCL),
    ("Some NCCL operations have failed", K.NCCL, E.NCCL),
    ("DistBackendError", K.NCCL, E.NCCL),
    ("NCCL error", K.NCCL, E.NCCL),
    ("Segmentation fault", K.SIGNAL, E.CRASHED),
    ("Traceback (most recent call last)", K.TRACEBACK, E.CRASHED),
)


@dataclass
class Found:
    """One event in one line. `effect` is what it means for the run's fate."""

    kind: K
    text: str
    effect: E | None = None  # what it means for the fate
    key: str | None = None  # events with the same key are one event
    follow: OpenRecord | None = None  # details come on the next lines: what they are
    weight: int = 0  # how well the text names the cause (the fate's reason prefers more)


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters at a word boundary, with an ellipsis when cut."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit - 1)
    if cut < limit // 2:
        cut = limit - 1
    return text[:cut].rstrip(" ,;:") + "…"


def hint(text: str) -> bool:
    return _HINT.search(text) is not None


def classify(text: str) -> list[Found]:
    """The events in one (hinted) line, most specific first."""
    short = clip(text, MAX_TEXT)
    if _OOM.search(text):
        return [Found(K.OOM, _oom_text(text), E.OOM, weight=2 if "Tried" in text else 1)]
    out: list[Found] = []
    if _NCCL.search(text):
        out.append(_nccl(text))
    m = _RECOMPILE.search(text)
    if m is not None:
        if m.group("fail"):
            out.append(Found(K.RECOMPILE, short, E.CRASHED))
        elif m.group("limit"):
            limit = f"{m.group('limit')} ({m.group('n')}) hit"
            out.append(Found(K.RECOMPILE, limit, None, follow=OpenRecord.RECOMPILE))
        else:
            where = f" in {m.group('at')}" if m.group("at") else ""
            out.append(
                Found(K.RECOMPILE, f"recompiling {m.group('fn')}{where}", follow=OpenRecord.GUARD)
            )
    m = _GRAPH_BREAK.search(text)
    if m is not None and not out:
        at = f" at {m.group('at')}" if m.group("at") else ""
        out.append(Found(K.GRAPH_BREAK, f"graph break{at}", follow=OpenRecord.REASON))
    sig = _signal(text, short)
    if sig is not None:
        out.append(sig)
    if sig is None and _ABORT.search(text) and not out:  # an NCCL abort said so above
        weight = 2 if _ABORT_TELLING.search(text) else 1
        out.append(Found(K.ERROR, short, E.CRASHED, weight=weight))
    if not out and _UNCAUGHT.search(text):
        out.append(Found(K.ERROR, short, E.CRASHED, weight=1))
    if _FINISHED.search(text):
        out.append(Found(K.FINISHED, short, E.FINISHED))
    if _RESTART.search(text):
        out.append(Found(K.RESTART, short, E.RESTART))
    if out:
        return out
    if _ERROR.search(text):
        m = _EXCEPTION.match(short)
        if m is not None:
            base = short.split(":", 1)[0].rsplit(".", 1)[-1]
            effect = exception_effect(short.split(":", 1)[0], short)
            return [Found(K.ERROR, short, None if base in WRAPPERS else effect)]
        return [Found(K.ERROR, short, None)]
    if _WARNING.search(text):
        return [Found(K.WARNING, short, None)]
    return out


def init_hint(text: str) -> bool:
    """A line a run prints while it loads, before training."""
    return _INIT.search(text) is not None


def test_summary(text: str) -> bool:
    """A test or final evaluation summary (`Test metric`, `test_loss`, `| test |`)."""
    return _TEST_SUMMARY.search(text) is not None


def cut_event(text: str) -> Found | None:
    """The event a last line cut mid-word still names (`…Watchdog caught collective
    oper`): the longest end of the line that begins one of the telling phrases."""
    tail = text.rstrip()[-60:]
    for phrase, kind, effect in _CUT:
        for size in range(min(len(phrase), len(tail)), 7, -1):
            if tail.endswith(phrase[:size]):
                return Found(kind, clip(text, MAX_TEXT) + " (cut short)", effect)
    return None


def _oom_text(text: str) -> str:
    short = clip(text, 300)
    if len(text.strip()) <= 300:
        return short
    tried = _TRIED.search(text)
    gpu = _OOM_GPU.search(text)
    allocated = _ALLOCATED.search(text)
    unallocated = _UNALLOCATED.search(text)
    bits = [
        f"tried to allocate {tried.group(1)}" if tried else "",
        f"GPU {gpu.group(1)}" if gpu else "",
        # the end of a long line, which the text below cuts: what `why` weighs
        f"{allocated.group(1)} allocated by PyTorch" if allocated else "",
        f"{unallocated.group(1)} reserved but unallocated" if unallocated else "",
    ]
    said = ", ".join(b for b in bits if b)
    return f"CUDA out of memory ({said}): {clip(text, 240)}" if said else short


def _nccl(text: str) -> Found:
    """An NCCL failure; the watchdog's own line names the operation and its timeout."""
    work = _WORK.search(text)
    terminate = "terminate called" in text or "what():" in text
    if work is None:
        if "Watchdog caught" in text and not terminate:  # its details on the next line
            return Found(K.NCCL, clip(text, MAX_TEXT), E.NCCL, weight=3, follow=OpenRecord.NCCL)
        return Found(K.NCCL, clip(text, MAX_TEXT), E.NCCL, weight=0 if terminate else 1)
    fields = dict(part.split("=", 1) for part in work.group("work").split(", ") if "=" in part)
    op = fields.get("OpType", "a collective")
    bits = [f"{op} timed out" if "timeout" in text else f"{op} failed"]
    if "SeqNum" in fields:
        bits.append(f"SeqNum {fields['SeqNum']}")
    if "Timeout(ms)" in fields:
        bits.append(f"timeout {fields['Timeout(ms)']} ms")
    ran = _RAN_FOR.search(text)
    if ran is not None:
        bits.append(f"ran for {ran.group('ms')} ms")
    rank = _RANK_OF.search(text)
    who = f" on rank {rank.group(1)}" if rank else ""
    complete = "Timeout(ms)" in fields or ran is not None
    summary = f"NCCL watchdog{who}: {', '.join(bits)}"
    if terminate:
        return Found(K.NCCL, clip(summary, MAX_TEXT), E.NCCL, weight=1)
    return Found(
        K.NCCL, clip(summary, MAX_TEXT), E.NCCL, weight=3,
        follow=None if complete else OpenRecord.NCCL,
    )  # fmt: skip


def nccl_more(text: str, extra: str) -> str:
    """An NCCL event's text with its continuation line read in."""
    return _nccl(text + " " + extra).text


def _signal(text: str, short: str) -> Found | None:
    m = _EXITCODE.search(text)
    if m is not None:
        return _from_code(int(m.group("code")), m.group("pid"), short)
    m = _SIGNAL.search(text)
    if m is not None:
        num = int(m.group("num") or m.group("num2"))
        pid = m.group("pid") or m.group("pid2")
        name = SIGNALS.get(num, f"signal {num}")
        return Found(K.SIGNAL, short, _signal_effect(name), f"signal:{num}:{pid}")
    m = _RETURNCODE.search(text)
    if m is not None:
        return _from_code(int(m.group("code") or m.group("code2")), None, short)
    m = _LAUNCHER_SIGNAL.search(text)
    if m is not None:
        if m.group("word") or m.group("bare"):  # Terminated, Killed: SIGTERM, SIGKILL
            return Found(K.SIGNAL, short, E.KILLED, weight=1)
        num = int(m.group("num") or m.group("num2"))
        name = SIGNALS.get(num, f"signal {num}")
        return Found(K.SIGNAL, short, _signal_effect(name), weight=1)
    if _CANCELLED.search(text):  # Slurm's time limit, a user's scancel, preemption
        return Found(K.SIGNAL, short, E.CANCELLED, weight=2)
    if _CRASH_SIGNAL.search(text):
        return Found(K.SIGNAL, short, E.CRASHED)
    if _KILLED.search(text):
        return Found(K.SIGNAL, short, E.KILLED)
    m = _SIGNAME.search(text)
    if m is not None:
        if _CLOSING.search(text):  # torchrun tearing down the other workers: a consequence
            return Found(K.SIGNAL, short, None)
        return Found(K.SIGNAL, short, _signal_effect(m.group("name")))
    return None


def _from_code(code: int, pid: str | None, short: str) -> Found:
    if 128 < code < 160:  # a shell's 128 + the signal that ended the process (137: SIGKILL)
        code = 128 - code
    if code < 0:
        name = SIGNALS.get(-code, f"signal {-code}")
        return Found(K.SIGNAL, short, _signal_effect(name), f"signal:{-code}:{pid}")
    return Found(K.EXIT, short, E.EXIT_ERROR if code else E.EXIT_OK, f"exit:{code}:{pid}")


def _signal_effect(name: str) -> E:
    return E.KILLED if name in _KILLING else E.CRASHED


_LOG_HEAD = re.compile(r"^(?:[IWEFVD]\d{4} [\d:.]+ +\d+ [^\]]{1,200}\] ?)?(?:\[[^\]]{0,60}\] ?)*")


def detail(kind: OpenRecord, text: str) -> tuple[str, str] | None:
    """What a line after a warning adds to it: (`function`, …), (`reason`, …)."""
    head = _LOG_HEAD.match(text)
    if head is not None:
        text = text[head.end() :]
    if kind == OpenRecord.RECOMPILE:
        m = _FUNCTION.search(text)
        if m is not None:
            return "function", f"function '{m.group('fn')}' ({m.group('where')})"
        m = _LAST_REASON.search(text)
        if m is not None:
            return "reason", clip(m.group("reason"), 300)
        return None
    if kind == OpenRecord.GUARD:
        m = _GUARD.match(text)
        if m is not None and "triggered by" not in text:
            return "reason", clip(m.group("guard"), 300)
        return ("skip", "") if "triggered by" in text else None
    if kind == OpenRecord.REASON:
        m = _REASON.match(text)
        return ("reason", clip(m.group("reason"), 300)) if m is not None else None
    return None


def exception_effect(exc_type: str, message: str) -> E | None:
    """What an exception that ended a traceback means for the run."""
    base = exc_type.rsplit(".", 1)[-1]
    if base in WRAPPERS:
        return None
    if base in INTERRUPTS:
        return E.KILLED
    if _OOM.search(exc_type) or _OOM.search(message):
        return E.OOM
    if _NCCL.search(exc_type) or _NCCL.search(message):
        return E.NCCL
    return E.CRASHED
