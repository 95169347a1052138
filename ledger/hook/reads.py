"""Device values (CUDA scalars) read without waiting for the GPU, and plain numbers out of
everything else the training thread hands over.

Reading a CUDA tensor with `.item()`, `.tolist()` or `.cpu()` makes the calling thread wait
until the GPU reaches it, and some of those calls wait holding the GIL: every thread of
the trainer waits with it. Here nothing waits: the values of a batch of steps are stacked
on a side stream (after an event marking what the trainer had queued), copied without
blocking into pinned host memory, and an event is recorded after the copy. The batch is
read (from host memory) only once `query()` says that event is done.

`Resolver` is written against the small `Device` interface so a test can drive it with
stand-in tensors and events; `TorchDevice` is the real one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

log = logging.getLogger("ledger.hook")

Number = float | int


class Copy(Protocol):
    """Values on their way from the device to the host."""

    def ready(self) -> bool:
        """True once the copy has completed (never waits)."""
        ...

    def values(self) -> list[Number | None]:
        """The values, in the order given (None: not a scalar); only once ready()."""
        ...


class Device(Protocol):
    def on_device(self, value: Any) -> bool:
        """Whether reading `value` on the host would wait for the device."""
        ...

    def copy(self, tensors: list[Any]) -> Copy:
        """Start copying these one-element tensors to the host; never waits."""
        ...


class Batch:
    """One copy and the values it brings, found by the tensor's identity."""

    __slots__ = ("_copy", "_index", "_tensors", "_values")

    def __init__(self, copy: Copy | None, tensors: list[Any]) -> None:
        self._copy = copy
        self._tensors = tensors  # held until read: their memory must not be reused before
        self._index = {id(t): i for i, t in enumerate(tensors)}
        self._values: list[Number | None] | None = None if copy is not None else []

    def ready(self) -> bool:
        if self._values is not None:
            return True
        assert self._copy is not None
        if not self._copy.ready():
            return False
        self._values = self._copy.values()
        self._tensors = []
        return True

    def value(self, tensor: Any) -> Number | None:
        i = self._index.get(id(tensor))
        if i is None or self._values is None or i >= len(self._values):
            return None
        return self._values[i]


class Resolver:
    """Turns values the training thread handed over into numbers, never waiting on a device.

    `start(values)` begins one non-blocking copy of the device values among them; the batch
    it returns says when they are on the host, and `number(value, batch)` then reads any of
    the values. Anything that is not a number (a tensor of several elements, a string) is
    counted in `failures` and becomes None: the value is lost, never the step.
    """

    def __init__(self, device: Device | None) -> None:
        self.device = device
        self.failures = 0
        self._empty = Batch(None, [])

    def start(self, values: Iterable[Any]) -> Batch:
        device = self.device
        if device is None:
            return self._empty
        tensors = [v for v in values if v is not None and device.on_device(v)]
        if not tensors:
            return self._empty
        try:
            return Batch(device.copy(tensors), tensors)
        except Exception as exc:  # a device that cannot copy: these values are lost, counted
            self.failures += len(tensors)
            log.debug("ledger.hook: could not start a device read (%r)", exc)
            return self._empty

    def number(self, value: Any, batch: Batch) -> Number | None:
        if value is None or type(value) is int or type(value) is float:
            return value
        if self.device is not None and self.device.on_device(value):
            found = batch.value(value)
            if found is None:
                self.failures += 1
                return None
            return int(found) if isinstance(found, bool) else found
        try:
            if isinstance(value, bool):
                return int(value)
            item = getattr(value, "item", None)
            number = item() if callable(item) else float(value)  # host values only here
            return number if isinstance(number, int) else float(number)
        except Exception:
            self.failures += 1
            return None


class _TorchCopy:
    __slots__ = ("_count", "_done", "_hosts", "_order")

    def __init__(self, done: list[Any], hosts: list[Any], order: list[int], count: int) -> None:
        self._done = done
        self._hosts = hosts
        self._order = order  # position in the caller's list of each value, group by group
        self._count = count

    def ready(self) -> bool:
        return all(event.query() for event in self._done)

    def values(self) -> list[Number | None]:
        flat: list[Any] = []
        for host in self._hosts:
            flat.extend(host.tolist())  # host memory: the copy is complete
        out: list[Number | None] = [None] * self._count
        for position, value in zip(self._order, flat, strict=True):
            out[position] = value
        return out


class TorchDevice:
    """Non-blocking reads of CUDA tensors through torch.

    `source(device)` gives the stream the trainer queues its work on (the one its timing
    events were last recorded on, else that device's default stream): an event recorded
    there marks the point the copy waits for on its side stream, so the copy waits for
    nothing queued later and the host waits for nothing at all.
    """

    def __init__(self, torch: Any, source: Callable[[Any], Any] | None = None) -> None:
        self._torch = torch
        self._source = source
        self._streams: dict[Any, Any] = {}

    def on_device(self, value: Any) -> bool:
        return bool(getattr(value, "is_cuda", False))

    def copy(self, tensors: list[Any]) -> Copy:
        torch = self._torch
        groups: dict[Any, list[int]] = {}
        for i, tensor in enumerate(tensors):
            if tensor.numel() == 1:  # others are not scalars: missing, and counted
                groups.setdefault((tensor.device, tensor.dtype), []).append(i)
        done, hosts, order = [], [], []
        for (device, dtype), positions in groups.items():
            marker = torch.cuda.Event()
            marker.record(self._stream_of(device))
            side = self._side(device)
            with torch.no_grad(), torch.cuda.stream(side):
                side.wait_event(marker)
                flat = torch.stack([tensors[i].reshape(()) for i in positions])
                host = torch.empty(flat.shape, dtype=dtype, pin_memory=True)
                host.copy_(flat, non_blocking=True)
                event = torch.cuda.Event()
                event.record(side)
            done.append(event)
            hosts.append(host)
            order.extend(positions)
        return _TorchCopy(done, hosts, order, len(tensors))

    def _stream_of(self, device: Any) -> Any:
        stream = self._source(device) if self._source is not None else None
        return stream if stream is not None else self._torch.cuda.default_stream(device)

    def _side(self, device: Any) -> Any:
        stream = self._streams.get(device)
        if stream is None:
            stream = self._streams[device] = self._torch.cuda.Stream(device=device)
        return stream
