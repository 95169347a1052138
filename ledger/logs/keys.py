"""What the names on a metric line mean: the key vocabulary, as data.

A key is normalised (`Elapsed time per iteration (ms)` → `elapsed_time_per_iteration_ms`)
and looked up here: step counters, the loss, step time, tokens, throughput (with its
unit), memory, and everything else as a metric under its own name. Tables first, then
families of names (`tokens_per_second_per_device`, `train/loss`, `*_ms`), so that names
no table lists are still read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ledger.logs.numbers import memory_scale, suffix_scale, time_scale

# What a value found on a line is (its "target"): a step column, a metric, or bookkeeping.
RANK, STEP, TOTAL, WALL, STEP_TIME, GPU_TIME, TOKENS, THROUGHPUT, LOSS = range(9)
MEM_ALLOC, MEM_RESERVED, METRIC, EPOCH, POSITION = range(9, 14)

# Throughput units, best first: a log's unit is the best one its first step line offers.
UNIT_RANK = {"tok/s": 0, "words/s": 1, "samples/s": 2, "it/s": 3, "s/it": 4, "TFLOP/s": 5}

STEP_KEYS = {
    "step": 0, "steps": 1, "iter": 0, "iteration": 0, "iters": 1, "it": 2, "global_step": 0,
    "globalstep": 0, "update": 1, "updates": 1, "num_updates": 0, "train_step": 0,
    "step_num": 0, "batch": 3, "current_steps": 0, "current_step": 0, "trainer_global_step": 0,
    "train_global_step": 0, "step_idx": 1, "completed_step": 0, "global_steps": 0,
}  # fmt: skip
TOTAL_KEYS = {"total_steps", "max_steps", "num_steps", "train_iters", "total_iters",
              "num_training_steps", "max_iters"}  # fmt: skip
LOSS_KEYS = {
    "loss": 0, "lm_loss": 0, "train_loss": 0, "train_loss_step": 1, "training_loss": 0,
    "loss_train": 0, "train_lm_loss": 0, "avg_loss": 2, "total_loss": 1,
    "xent": 3, "nll_loss": 2, "loss_avg": 2, "train_total_loss": 1, "reduced_loss": 1,
}  # fmt: skip
TIME_KEYS = {  # seconds unless the key or a glued unit says otherwise
    "dt": 0, "time": 1, "step_time": 0, "iter_time": 0, "iteration_time": 0, "batch_time": 1,
    "time_per_step": 0, "time_per_iteration": 0, "elapsed_time_per_iteration": 0,
    "t_step": 0, "step_avg": 3, "train_step_time": 0, "time_per_iter": 0, "step_duration": 0,
    "train_time_per_step": 0, "sec_per_step": 0, "s_step": 1,
}  # fmt: skip
TOKEN_KEYS = {"tokens", "ntokens", "num_tokens", "tokens_per_step", "tokens_per_batch",
              "tokens_per_iter"}  # fmt: skip
THROUGHPUT_KEYS = {
    "tps": ("tok/s", 0), "tok_s": ("tok/s", 0), "tok_sec": ("tok/s", 0), "tokens_s": ("tok/s", 0),
    "tokens_sec": ("tok/s", 0), "tokens_per_second": ("tok/s", 0),
    "tokens_per_sec": ("tok/s", 0), "tokens_per_second_per_gpu": ("tok/s", 0),
    "tok_s_gpu": ("tok/s", 1), "tokens_s_gpu": ("tok/s", 1), "tgs": ("tok/s", 1),
    "throughput_tokens": ("tok/s", 0), "tokens_per_s": ("tok/s", 0), "toks": ("tok/s", 2),
    "tok_per_sec": ("tok/s", 0), "tokens_per_sec_per_gpu": ("tok/s", 0),
    "wps": ("words/s", 0), "words_s": ("words/s", 0), "words_per_second": ("words/s", 0),
    "samples_per_second": ("samples/s", 0), "samples_per_sec": ("samples/s", 0),
    "samples_sec": ("samples/s", 0), "samples_s": ("samples/s", 0),
    "samplespersec": ("samples/s", 0), "currsamplespersec": ("samples/s", 0),
    "runningavgsamplespersec": ("samples/s", 1), "sps": ("samples/s", 1),
    "samples_second": ("samples/s", 0), "it_s": ("it/s", 0), "s_it": ("s/it", 0),
    "tflops": ("TFLOP/s", 0), "tflop_s": ("TFLOP/s", 0), "tflops_per_gpu": ("TFLOP/s", 0),
    "throughput_per_gpu_tflop_s_gpu": ("TFLOP/s", 0), "approx_flops_per_gpu": ("TFLOP/s", 1),
    "model_tflops": ("TFLOP/s", 1), "tflop_s_gpu": ("TFLOP/s", 0),
    "samples_per_second_per_gpu": ("samples/s", 1),
    # PyTorch/XLA's per-device `Rate=` (examples a second); its `GlobalRate=` is a metric
    "rate": ("samples/s", 3), "examples_per_sec": ("samples/s", 0),
    "examples_per_second": ("samples/s", 0), "ex_s": ("samples/s", 1),
}  # fmt: skip
ALLOC_KEYS = {"memory_allocated", "mem_allocated", "memallocated", "allocated", "mem_alloc",
              "memory_alloc", "alloc", "allocated_memory", "mem_allocated_gb",
              "memory_allocated_gb", "cuda_memory_allocated"}  # fmt: skip
RESERVED_KEYS = {"memory", "mem", "memory_reserved", "mem_reserved", "reserved",
                 "max_memory_reserved", "max_reserved", "gpu_mem", "gpu_memory",
                 "memory_gib", "mem_gb", "peak_memory", "max_mem", "mem_gib",
                 "peak_memory_active", "max_memory_allocated"}  # fmt: skip
IGNORED_KEYS = {"rank", "local_rank", "pid", "line", "total", "of", "at", "in", "v_num",
                "node", "host", "port", "seed", "gpu", "device", "worker", "version",
                "http", "https"}  # fmt: skip

# Units that may stand after a space (`45.2 ms`, `1234 tok/s`); others must be glued.
SPACED_UNITS = (
    r"tok/s|tokens/s|tok/sec|tokens/sec|samples/s|samples/sec|it/s|s/it|words/s"
    r"|TFLOP/s|TFLOPs|TFLOPS|GiB|GB|MiB|MB|ms|sec|s"
)
RATE_UNITS = {
    "tok/s": "tok/s", "tokens/s": "tok/s", "tok/sec": "tok/s", "tokens/sec": "tok/s",
    "tps": "tok/s", "samples/s": "samples/s", "samples/sec": "samples/s", "it/s": "it/s",
    "s/it": "s/it", "words/s": "words/s", "wps": "words/s", "tflop/s": "TFLOP/s",
    "tflops": "TFLOP/s", "tflop/s/gpu": "TFLOP/s", "step/s": "it/s", "steps/s": "it/s",
    "batch/s": "it/s", "sample/s": "samples/s", "token/s": "tok/s", "img/s": "samples/s",
    "imgs/s": "samples/s", "images/s": "samples/s", "images/sec": "samples/s",
    "examples/s": "samples/s", "examples/sec": "samples/s", "seq/s": "samples/s",
    "sequences/s": "samples/s", "words/sec": "words/s",
}  # fmt: skip

_NORMAL = re.compile(r"[^a-z0-9]+")
_EVAL = re.compile(r"^(?:eval|val|valid|validation|test|dev|evaluation)(?:_|$)|_(?:val|eval)_")
_LOSS_FAMILY = re.compile(r"^(?:train(?:ing)?_)?(?:lm_|ce_|total_)?loss(?:_|$)")
_TIME_FAMILY = re.compile(r"^(?:train_)?(?:step|iter|iteration|batch)_?(?:time|duration)")
_RATE_NAME = re.compile(
    r"^(?:train_)?(?:throughput_)?(?P<what>tokens|token|tok|samples|sample|tflops|tflop|words"
    r"|images|imgs|img|examples|sequences|seqs|seq)"
    r"_(?:per_)?(?:s|sec|second)(?:_|$)"
)
_RATE_OF = {"token": "tok/s", "tokens": "tok/s", "tok": "tok/s", "sample": "samples/s",
            "samples": "samples/s", "tflop": "TFLOP/s", "tflops": "TFLOP/s",
            "words": "words/s", "images": "samples/s", "imgs": "samples/s", "img": "samples/s",
            "examples": "samples/s", "sequences": "samples/s", "seqs": "samples/s",
            "seq": "samples/s"}  # fmt: skip
_PREFIXES = ("train_", "training_", "trainer_", "throughput_", "perf_")

_norm_cache: dict[str, str] = {}


def normalize(key: str) -> str:
    """`Elapsed time per iteration (ms)` → `elapsed_time_per_iteration_ms`."""
    name = _norm_cache.get(key)
    if name is None:
        name = _NORMAL.sub("_", key.lower()).strip("_")[:100]
        if len(_norm_cache) < 4096:
            _norm_cache[key] = name
    return name


def is_eval(name: str) -> bool:
    """`eval_loss`, `val_loss`, `valid_ppl`: a summary of an evaluation, not of a step."""
    return _EVAL.search(name) is not None


@dataclass
class Value:
    """One value found on a line: where it is, what it means and how to convert it."""

    commas: bool = field(default=False, init=False)  # the learning line had `12,345` here

    start: int
    end: int
    target: int
    name: str = ""
    scale: float = 1.0
    unit: str = ""  # the throughput unit, for THROUGHPUT candidates
    priority: int = 0
    kind: str = "float"  # float, int, memory (MiB or GiB by size), wall


def target(name: str, unit: str, vs: int, ve: int) -> Value:
    """What the value of key `name` (its glued or spaced `unit`) at [vs, ve) is."""
    if is_eval(name):
        return Value(vs, ve, METRIC, name=name)
    found = _known(name, unit, vs, ve)
    if found is not None:
        return found
    for prefix in _PREFIXES:  # `train/tokens_per_sec`, `throughput/tflops`
        if name.startswith(prefix) and len(name) > len(prefix):
            found = _known(name[len(prefix) :], unit, vs, ve)
            # `train_time` is the time trained so far, not a step's: only rates and losses
            if found is not None and found.target in (THROUGHPUT, LOSS, TOKENS):
                found.name = found.name or name
                return found
    return _by_unit(name, unit, vs, ve)


def _known(name: str, unit: str, vs: int, ve: int) -> Value | None:
    lower = unit.lower()
    if name in STEP_KEYS and not unit:
        return Value(vs, ve, STEP, kind="int", priority=STEP_KEYS[name])
    if name in TOTAL_KEYS and not unit:
        return Value(vs, ve, TOTAL, kind="int")
    if name == "epoch":
        return Value(vs, ve, EPOCH, name="epoch")
    if name in LOSS_KEYS:
        return Value(vs, ve, LOSS, priority=LOSS_KEYS[name])
    if _LOSS_FAMILY.match(name) and "scale" not in name:
        return Value(vs, ve, LOSS, priority=4)
    ms = name.endswith("_ms")
    base = name[:-3] if ms else name
    if base in TIME_KEYS or _TIME_FAMILY.match(base):
        scale = time_scale(unit) if unit else (1e-3 if ms else 1.0)
        if scale is None:
            return Value(vs, ve, METRIC, name=name)
        return Value(vs, ve, STEP_TIME, scale=scale, priority=TIME_KEYS.get(base, 3))
    if name in THROUGHPUT_KEYS:
        rate, priority = THROUGHPUT_KEYS[name]
        scale = suffix_scale(unit) or 1.0
        if lower in ("tflops", "tflop/s"):
            rate = "TFLOP/s"
        return Value(vs, ve, THROUGHPUT, name=name, scale=scale, unit=rate, priority=priority)
    m = _RATE_NAME.match(name)
    if m is not None:
        return Value(vs, ve, THROUGHPUT, name=name, scale=suffix_scale(unit) or 1.0,
                     unit=_RATE_OF[m.group("what")], priority=2)  # fmt: skip
    if name == "throughput" or name.startswith("throughput_"):
        canonical = RATE_UNITS.get(lower)
        if canonical is not None:
            return Value(vs, ve, THROUGHPUT, name=name, unit=canonical, priority=1)
        if not unit and name == "throughput":  # a rate in a unit the line does not say
            return Value(vs, ve, THROUGHPUT, name=name, unit="", priority=4)
    if name in TOKEN_KEYS:
        return Value(vs, ve, TOKENS, kind="int", scale=suffix_scale(unit) or 1.0)
    if name in ALLOC_KEYS or name in RESERVED_KEYS:
        tgt = MEM_ALLOC if name in ALLOC_KEYS else MEM_RESERVED
        scale = memory_scale(unit) if unit else _memory_hint(name)
        if scale is None and unit:
            return Value(vs, ve, METRIC, name=name)
        return Value(vs, ve, tgt, scale=scale or 1.0, kind="float" if scale else "memory")
    return None


def _by_unit(name: str, unit: str, vs: int, ve: int) -> Value:
    lower = unit.lower()
    if unit and unit != "%":
        scale = suffix_scale(unit)
        if scale is not None:
            return Value(vs, ve, METRIC, name=name, scale=scale)
        if memory_scale(unit) is not None and ("mem" in name or "alloc" in name):
            return Value(vs, ve, METRIC, name=f"{name}_mib", scale=memory_scale(unit) or 1.0)
        rate = RATE_UNITS.get(lower)
        if rate is not None:
            return Value(vs, ve, THROUGHPUT, name=name, unit=rate, priority=2)
        if lower in ("ms", "s", "sec"):
            return Value(vs, ve, METRIC, name=f"{name}_s", scale=time_scale(unit) or 1.0)
    return Value(vs, ve, METRIC, name=name)


def rate_unit(unit: str) -> str | None:
    """The canonical spelling of a rate unit (`tokens/sec` → `tok/s`), else None."""
    return RATE_UNITS.get(unit.lower())


def _memory_hint(name: str) -> float | None:
    if "gib" in name or "gb" in name:
        return 1024.0
    if "mib" in name or "mb" in name:
        return 1.0
    return None
