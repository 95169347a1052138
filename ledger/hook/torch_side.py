"""What the hook reads from torch: the rank, CUDA timing events, memory and dynamo counters,
and plain numbers out of tensors.

torch is never imported here: the hook uses the torch the training script has already
imported (`sys.modules`), so a script without torch pays nothing and one with torch pays
no second import. Everything that reads torch internals is guarded: a torch that moved a
private counter costs a metric, never the training run.
"""

from __future__ import annotations

import os
import sys
from collections import deque
from typing import Any, cast

MIB = float(1 << 20)


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
        except Exception:
            pass
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
    except Exception:
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

    def recorded(self) -> Any:
        """An event from the pool, recorded now on the current stream."""
        try:
            event = self._free.pop()
        except IndexError:
            event = self._event(enable_timing=True)
        if self._stream is None:
            event.record()
        else:
            event.record(self._stream.current())
        return event

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


def cuda_memory_mib(torch: Any) -> tuple[float, float, float] | None:
    """(allocated, max allocated, reserved) in MiB on the current device: one stats read."""
    try:
        stats = torch.cuda.memory_stats()
    except Exception:
        return None
    return (
        stats.get("allocated_bytes.all.current", 0) / MIB,
        stats.get("allocated_bytes.all.peak", 0) / MIB,
        stats.get("reserved_bytes.all.current", 0) / MIB,
    )


def dynamo_counters() -> dict[str, int] | None:
    """Frames compiled, recompilations and graph breaks so far, if dynamo is in use.

    Read from the writer thread while the training thread may be compiling: a dict that
    changes size under us raises RuntimeError, and the reading is simply skipped.
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
    except (RuntimeError, TypeError, ValueError, AttributeError):
        return None


class Resolver:
    """Turns what the training thread handed over (tensors, numpy scalars) into floats.

    Runs on the forwarder thread. A CUDA tensor is copied on a side stream of its own,
    after waiting for the step's end event, so the copy neither waits for nor delays kernels
    the training thread queued since. `prefetch` reads many at once: one stacking kernel and
    one copy to the host per device and dtype, instead of one copy (and one hand-over of
    the GIL, which `item()` releases) per value.
    """

    def __init__(self, torch: Any | None) -> None:
        self._torch = torch
        self._streams: dict[Any, Any] = {}
        self._read: dict[int, float | int] = {}
        self.failures = 0

    def prefetch(self, tensors: list[Any], ready: Any) -> None:
        """Read these one-element CUDA tensors now; `number` then finds them (until `forget`)."""
        torch = self._torch
        if torch is None or len(tensors) < 2:
            return
        groups: dict[Any, list[Any]] = {}
        for tensor in tensors:
            groups.setdefault((tensor.device, tensor.dtype), []).append(tensor)
        for (device, _), group in groups.items():
            try:
                with torch.no_grad(), torch.cuda.stream(self._stream(device)):
                    if ready is not None:
                        torch.cuda.current_stream(device).wait_event(ready)
                    else:  # a flush: everything queued so far, on every stream
                        torch.cuda.synchronize(device)
                    values = torch.stack([t.reshape(()) for t in group]).tolist()
            except Exception:
                continue  # read one by one instead
            for tensor, value in zip(group, values, strict=True):
                self._read[id(tensor)] = value

    def forget(self) -> None:
        self._read.clear()

    def _stream(self, device: Any) -> Any:
        stream = self._streams.get(device)
        if stream is None:
            assert self._torch is not None
            stream = self._streams[device] = self._torch.cuda.Stream(device=device)
        return stream

    def number(self, value: Any, ready: Any = None) -> float | int | None:
        if value is None or type(value) is int or type(value) is float:
            return value
        read = self._read.get(id(value)) if self._read else None
        if read is not None:
            return read
        try:
            if isinstance(value, bool):
                return int(value)
            if getattr(value, "is_cuda", False):
                return self._cuda_item(value, ready)
            item = getattr(value, "item", None)
            number = item() if callable(item) else float(value)
            return number if isinstance(number, int) else float(number)
        except Exception:
            # A tensor of several elements, a string…: the value is lost, the step is not.
            self.failures += 1
            return None

    def _cuda_item(self, tensor: Any, ready: Any) -> float | int:
        if ready is None:
            # No event to wait for (meter.log): read on the default stream, which is
            # ordered after the work queued on it (where training runs unless it picked
            # a stream of its own).
            return cast("float | int", tensor.item())
        torch = self._torch
        assert torch is not None  # a CUDA tensor means torch was imported
        stream = self._streams.get(tensor.device)
        if stream is None:
            stream = self._streams[tensor.device] = torch.cuda.Stream(device=tensor.device)
        with torch.cuda.stream(stream):
            stream.wait_event(ready)
            return cast("float | int", tensor.item())
