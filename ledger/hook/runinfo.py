"""What a run ran with, gathered once per run: versions, GPUs, world size, host, command
line, git commit, and the environment variables that change performance.

Two halves: what only the training process knows (its torch: versions, the GPUs it sees,
torch.distributed's world size), read on the forwarder thread, and what the writer
process can find out itself (host, git, environment, which it inherits). Values are
stored through the redaction gate (run_config.value; masked whole when the key names a
secret), so a token in an environment variable or on the command line never lands.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from typing import Any

# Environment variables that change how fast a step runs.
ENV_PREFIXES = ("NCCL_", "TORCH_", "PYTORCH_", "CUDA_", "CUDNN_", "TORCHINDUCTOR_", "NVIDIA_TF32")
ENV_NAMES = frozenset(
    {
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "WORLD_SIZE",
        "LOCAL_WORLD_SIZE",
        "MASTER_ADDR",
        "TOKENIZERS_PARALLELISM",
        "XLA_FLAGS",
        "LD_PRELOAD",
    }
)
VALUE_CHARS = 2000
GIT_TIMEOUT_S = 5.0


def torch_config(torch: Any | None, cuda: bool) -> dict[str, str]:
    """The training process's torch: versions, and with CUDA in use, its GPUs."""
    out: dict[str, str] = {}
    if torch is None:
        return out
    try:
        out["torch"] = str(torch.__version__)
        cuda_version = getattr(getattr(torch, "version", None), "cuda", None)
        if cuda_version:
            out["cuda"] = str(cuda_version)
        if cuda:
            cudnn = torch.backends.cudnn.version()
            if cudnn:
                out["cudnn"] = str(cudnn)
            nccl = getattr(torch.cuda, "nccl", None)
            if nccl is not None:
                out["nccl"] = ".".join(str(p) for p in _tuple(nccl.version()))
            count = int(torch.cuda.device_count())
            out["gpu.count"] = str(count)
            names = [str(torch.cuda.get_device_name(i)) for i in range(count)]
            if names:
                out["gpu.name"] = ", ".join(names)
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            out["world_size"] = str(dist.get_world_size())
            out["dist_backend"] = str(dist.get_backend())
    except Exception as exc:  # a torch without one of these: the others are still told
        out["config_error"] = f"{type(exc).__name__}: {exc}"[:VALUE_CHARS]
    return out


def _tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def process_config(argv: list[str], cwd: str, *, git: bool = True) -> dict[str, str]:
    """What the writer process finds out itself (it inherits the trainer's environment);
    `git=False` leaves out the commit (two subprocesses: the writer asks them aside)."""
    out: dict[str, str] = {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "command": " ".join(argv),
    }
    world = os.environ.get("WORLD_SIZE")
    out["world_size"] = world if world and world.isdigit() else "1"
    if git:
        out.update(git_state(cwd))
    for name, value in sorted(os.environ.items()):
        if name in ENV_NAMES or name.startswith(ENV_PREFIXES):
            out[f"env.{name}"] = value[:VALUE_CHARS]
    return out


def git_state(cwd: str) -> dict[str, str]:
    """The commit checked out where the script was started, and whether the tree is dirty."""
    try:
        commit = _git(cwd, "rev-parse", "HEAD")
        if not commit:
            return {}
        status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"git_commit": commit, "git_dirty": "true" if status else "false"}


def _git(cwd: str, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", cwd, *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        check=False,
    )
    return done.stdout.strip() if done.returncode == 0 else ""
