"""What the hook reads from torch: the rank, CUDA timing events, memory and dynamo counters.
(Tensors become numbers in ledger.hook.reads, without waiting for the GPU.)

torch is never imported here: the hook uses the torch the training script has already
imported (`sys.modules`), so a script without torch pays nothing and one with torch pays
no second import. Everything that reads torch internals is guarded: a torch that moved a
private counter costs a metric, never the training run.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections import deque
from typing import Any

from ledger.hook.reads import Device, TorchDevice

MIB = float(1 << 20)
log = logging.getLogger("ledger.hook")
_now = time.perf_counter_ns
TIMED_RECORDS = 15  # the pool times one record() in 16: what an event costs this host
FIRST_TIMED = 4  # and the first few, so the meter knows early


def loaded_torch() -> Any | None:
    """The torch module if the program imported it, else None."""
    return sys.modules.get("torch")


def detect_rank() -> int:
    """torch.distributed's rank when it is initialised, else $RANK, else $LOCAL_RANK, else 0."""
    torch = loaded_torch()
    if torch is not None:
        try:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                return int(dist.get_rank())
        except Exception as exc:  # a torch without distributed: the environment says
            log.debug("ledger.hook: torch.distributed gave no rank (%r)", exc)
    for name in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def cuda_in_use() -> bool:
    """True when the program's torch can time steps with CUDA events."""
    torch = loaded_torch()
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_available())
    except Exception as exc:  # a broken CUDA install: the meter times on the host only
        log.info("ledger.hook: torch.cuda.is_available() failed (%r); no CUDA timing", exc)
        return False


class EventPool:
    """Timing events for the training thread, recycled by the writer once resolved.

    Creating a CUDA event per step would cost a driver call each time; a pool makes the
    training thread's share one `record()` per boundary, on the current stream.
    """

    def __init__(self, torch: Any) -> None:
        self._event = torch.cuda.Event
        self._free: deque[Any] = deque()
        self._stream = CurrentStream.of(torch)
        self._calls = 0
        self.created = 0  # events made because none was free (the pool's size, in effect)
        self.timed_ns = 0  # over `timed` sampled calls of recorded(): an event's host cost
        self.timed = 0

    def recorded(self) -> Any:
        """An event from the pool, recorded now on the current stream."""
        self._calls = calls = self._calls + 1
        if self._free:
            event = self._free.pop()
        else:  # every event is still with the writer: the pool grows by one
            event = self._event(enable_timing=True)
            self.created += 1
        started = _now() if calls <= FIRST_TIMED or not calls & TIMED_RECORDS else 0
        if self._stream is None:
            event.record()
        else:
            event.record(self._stream.current())
        if started:
            self.timed_ns += _now() - started
            self.timed += 1
        return event

    def record_ns(self) -> float | None:
        """What one record() has cost this thread, on average; None before it is known."""
        return self.timed_ns / self.timed if self.timed else None

    def stream_for(self, device: Any) -> Any:
        """The stream the training thread last recorded on, if it is on `device`."""
        current = self._stream
        if current is None or current._key is None:
            return None
        index = getattr(device, "index", device)
        return current._stream if index is None or int(current._key[1]) == index else None

    def device(self) -> int | None:
        """The CUDA device index the last event was recorded on, when known."""
        key = self._stream._key if self._stream is not None else None
        return int(key[1]) if key is not None else None

    def give(self, *events: Any) -> None:
        self._free.extend(e for e in events if e is not None)


class CurrentStream:
    """The current CUDA stream as a torch Stream, rebuilt only when it changes.

    `Event.record()` with no stream asks `torch.cuda.current_stream()`, which builds a new
    Python Stream object each call: about 4 µs of a 6 µs record on an H200 host, twice a
    step. Asking torch's C side which stream is current costs 0.1 µs; the Stream object is
    rebuilt only when the answer changes (the script switched streams or devices).
    """

    def __init__(self, get_device: Any, get_stream: Any, make: Any) -> None:
        self._get_device = get_device
        self._get_stream = get_stream
        self._make = make
        self._key: Any = None
        self._stream: Any = None

    @classmethod
    def of(cls, torch: Any) -> CurrentStream | None:
        """None when this torch lacks the calls (then events record on their own)."""
        c = getattr(torch, "_C", None)
        get_device = getattr(c, "_cuda_getDevice", None)
        get_stream = getattr(c, "_cuda_getCurrentStream", None)
        make = getattr(torch.cuda, "Stream", None)
        if get_device is None or get_stream is None or make is None:
            return None
        return cls(get_device, get_stream, make)

    def current(self) -> Any:
        key = self._get_stream(self._get_device())  # (stream id, device index, device type)
        if key != self._key:
            self._stream = self._make(stream_id=key[0], device_index=key[1], device_type=key[2])
            self._key = key
        return self._stream


def device_reads(torch: Any, events: EventPool) -> Device:
    """How the forwarder reads CUDA values: without waiting, after the trainer's stream."""
    return TorchDevice(torch, events.stream_for)


def cuda_memory_mib(torch: Any) -> tuple[float, float, float] | None:
    """(allocated, max allocated, reserved) in MiB on the current device: one stats read."""
    try:
        stats = torch.cuda.memory_stats()
    except Exception as exc:  # this reading is missing (NULL); the step is kept
        log.debug("ledger.hook: torch.cuda.memory_stats() failed (%r)", exc)
        return None
    return (
        stats.get("allocated_bytes.all.current", 0) / MIB,
        stats.get("allocated_bytes.all.peak", 0) / MIB,
        stats.get("reserved_bytes.all.current", 0) / MIB,
    )


def dynamo_counters() -> dict[str, int] | None:
    """Frames compiled, recompilations and graph breaks so far, if dynamo is in use.

    Read from the writer thread while the training thread may be compiling: a dict that
    changes size under us raises RuntimeError, and the reading is skipped (the next one,
    half a second later, has the same counters).
    """
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return None
    try:
        counters = utils.counters
        frames = counters.get("frames", {})
        graph_breaks = sum(list(counters.get("graph_break", {}).values()))
        result = {
            "dynamo_frames_compiled": int(frames.get("ok", 0)),
            "dynamo_graph_breaks": int(graph_breaks),
        }
        convert = sys.modules.get("torch._dynamo.convert_frame")
        per_frame = getattr(convert, "FRAME_COMPILE_COUNTER", None)
        if per_frame is not None:
            # Compilations of a frame after its first: what a changed guard cost.
            result["dynamo_recompiles"] = sum(max(0, int(n) - 1) for n in list(per_frame.values()))
        return result
    except (RuntimeError, TypeError, ValueError, AttributeError) as exc:
        log.debug("ledger.hook: dynamo's counters were not read this time (%r)", exc)
        return None
