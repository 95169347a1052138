"""What a log shows of how the run was started, as (key, value) config items.

Keys are plain and stable (docs/logs.md lists them): versions (`torch`, `cuda`, `cudnn`,
`nccl`, `transformers`, `deepspeed`, `python`, `driver`), the launch (`world_size`,
`nproc_per_node`, `nnodes`), the GPUs (`gpu.name`, `gpu.count`), the trainer's banner
(`num_epochs`, `total_steps`, `batch_size`, `total_batch_size`, `grad_accum`,
`trainable_params`, `num_examples`) and command-line arguments from `Namespace(...)` and
`TrainingArguments(...)` dumps (`arg.lr`, `arg.token_budget`…).
"""

from __future__ import annotations

import re

from ledger.logs.events import clip

MAX_VALUE = 200
MAX_ARGS = 400

_HINT = re.compile(
    r"[Vv]ersion|VERSION|==\d|world[_ ]size|WORLD_SIZE|nproc|nnodes|Namespace\(|Arguments\("
    r"|GPU \d+:|[Dd]evice|Num (?:examples|Epochs)|batch size|Total optimization|accumulation"
    r"|trainable parameters|MEMBER: |[Nn]um processes|Found \d+ GPU|number of GPUs|n_gpu"
)
_VERSION = re.compile(
    r"(?<![\w/.])[`'\"]?(?P<name>torch|pytorch|cuda|nccl|cudnn|transformers|deepspeed|python"
    r"|accelerate|flash[_-]attn|triton|lightning|driver)[`'\"]?(?:[ _]version)?"
    r"(?:\s*\([^)]{0,20}\))?\s*(?::|==|=|\.{3,}|\s)\s*v?(?P<v>\d+(?:\.\d+)+[\w.+\-]*)",
    re.IGNORECASE,
)
_CUDA_BUILT = re.compile(r"CUDA used to build PyTorch:\s*(?P<v>\d+(?:\.\d+)+)")
_DRIVER = re.compile(r"Driver Version:\s*(?P<driver>[\d.]+)\s+CUDA Version:\s*(?P<cuda>[\d.]+)")
_NCCL_INFO = re.compile(r"NCCL version (?P<v>\d+(?:\.\d+)+[\w.+\-]*)")
_LAUNCH = re.compile(
    r"\b(?P<key>world[_ ]size|WORLD_SIZE|nproc_per_node|nnodes|LOCAL_WORLD_SIZE|num_processes"
    r"|[Nn]um processes|n_gpu)\b\s*[:=]*\s*(?P<v>\d{1,6})\b"
)
_MEMBER = re.compile(r"MEMBER: \d+/(?P<v>\d{1,6})\b")
_GPU_NAME = re.compile(
    r"^GPU \d+: (?P<name>[^()]+?)\s*\(UUID|(?:[Uu]sing device|[Dd]evice name|GPU)\s*[:=]\s*"
    r"(?:cuda(?::\d+)?\s*)?\(?(?P<name2>(?:NVIDIA|Tesla|AMD|Instinct)[^()\n,]{2,60}?)\)?\s*$"
)
_GPU_COUNT = re.compile(r"Found (?P<v>\d+) GPUs?|number of GPUs\s*[:=]\s*(?P<v2>\d+)")
_BANNER = re.compile(
    r"(?:^|\s)(?P<key>Num examples|Num Epochs|Instantaneous batch size per device"
    r"|Total train batch size[^=]*|Gradient Accumulation steps|Total optimization steps"
    r"|Number of trainable parameters)\s*=\s*(?P<v>[\d,]+)\s*$"
)
_BANNER_KEYS = {
    "Num examples": "num_examples", "Num Epochs": "num_epochs",
    "Instantaneous batch size per device": "batch_size",
    "Gradient Accumulation steps": "grad_accum", "Total optimization steps": "total_steps",
    "Number of trainable parameters": "trainable_params",
}  # fmt: skip
_ARGS_OPEN = re.compile(r"\b(?P<what>Namespace|\w*Arguments|\w*Config)\((?P<rest>.*)$")
_ARG_NAME = re.compile(r"[A-Za-z_]\w{0,80}")


def hint(text: str) -> bool:
    return _HINT.search(text) is not None


def read(text: str) -> list[tuple[str, str]]:
    """The config items one line states."""
    out: list[tuple[str, str]] = []
    m = _DRIVER.search(text)
    if m is not None:
        return [("driver", m.group("driver")), ("driver_cuda", m.group("cuda"))]
    m = _CUDA_BUILT.search(text)
    if m is not None:
        return [("cuda", m.group("v"))]
    m = _NCCL_INFO.search(text)
    if m is not None:
        return [("nccl", m.group("v"))]
    m = _BANNER.search(text)
    if m is not None:
        key = m.group("key")
        name = _BANNER_KEYS.get(key, "total_batch_size")
        return [(name, m.group("v").replace(",", ""))]
    for m in _VERSION.finditer(text):
        name = m.group("name").lower().replace("-", "_")
        out.append(({"pytorch": "torch"}.get(name, name), m.group("v").rstrip(".,")))
    for m in _LAUNCH.finditer(text):
        key = m.group("key").lower().replace(" ", "_")
        key = {"local_world_size": "nproc_per_node", "num_processes": "world_size",
               "n_gpu": "gpu.count"}.get(key, key)  # fmt: skip
        out.append((key, m.group("v")))
    m = _MEMBER.search(text)
    if m is not None:
        out.append(("world_size", m.group("v")))
    m = _GPU_NAME.search(text.strip())
    if m is not None:
        out.append(("gpu.name", (m.group("name") or m.group("name2")).strip()))
    m = _GPU_COUNT.search(text)
    if m is not None:
        out.append(("gpu.count", m.group("v") or m.group("v2")))
    return out


def opens_args(text: str) -> tuple[list[tuple[str, str]], bool] | None:
    """A `Namespace(…)` or `TrainingArguments(…)` dump: its arguments, and whether it goes
    on over the next lines (HF prints one `name=value,` a line). None when it is not one."""
    m = _ARGS_OPEN.search(text)
    if m is None:
        return None
    rest = m.group("rest")
    if not rest.strip():
        return [], True
    if "=" not in rest:
        return None
    body = rest.rstrip()
    closed = body.endswith(")")
    return split_args(body[:-1] if closed else body), not closed


def arg_line(text: str) -> tuple[str, str] | None:
    """One `name=value,` line of a dump that spans lines; None for a line that is not."""
    stripped = text.strip().rstrip(",")
    name, sep, value = stripped.partition("=")
    if not sep or not _ARG_NAME.fullmatch(name.strip()):
        return None
    return f"arg.{name.strip()}", clip(_unquote(value.strip()), MAX_VALUE)


def split_args(text: str) -> list[tuple[str, str]]:
    """`lr=0.001, name='x, y', sizes=[1, 2]` → [('arg.lr', '0.001'), …], brackets and
    quotes respected."""
    out: list[tuple[str, str]] = []
    depth = 0
    quote = ""
    start = 0
    parts = []
    for i, c in enumerate(text):
        if quote:
            if c == quote and text[i - 1 : i] != "\\":
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    for part in parts[:MAX_ARGS]:
        name, sep, value = part.partition("=")
        name = name.strip()
        if sep and _ARG_NAME.fullmatch(name):
            out.append((f"arg.{name}", clip(_unquote(value.strip()), MAX_VALUE)))
    return out


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value
