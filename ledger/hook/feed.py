"""What the training thread and the forwarder share, and nothing else of the meter.

The meter appends to `queue` (steps, and in order with them logs, fates and flush
requests) and to `costs`; the forwarder (ledger.hook.link) takes from both and gives the
timing events back to `events`. Deque appends and pops are atomic, so neither side locks.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from ledger.hook import torch_side
from ledger.hook.protocol import Flush, Log, SetFate, StepRecord

Queued = StepRecord | Log | SetFate | Flush
COSTS_KEPT = 100_000


class Feed:
    """The queue between the training thread and the forwarder, and the few facts the
    forwarder needs about this rank."""

    __slots__ = ("_tokens", "costs", "dropped", "events", "queue", "rank", "torch", "waiters")

    def __init__(
        self, torch: Any | None, events: torch_side.EventPool | None, rank: int | None
    ) -> None:
        self.queue: deque[Queued] = deque()
        self.costs: deque[int] = deque(maxlen=COSTS_KEPT)  # sampled caller-side ns per step
        self.dropped = 0  # steps the training thread dropped (the queue was full)
        self.events = events  # the timing-event pool; None without CUDA
        self.torch = torch
        self.rank = rank  # as given to the meter; None: found at the first step forwarded
        self.waiters: dict[int, threading.Event] = {}  # flush tokens → who waits
        self._tokens = 0

    def flush_request(self, done: threading.Event) -> Flush:
        self._tokens = token = self._tokens + 1
        self.waiters[token] = done
        return Flush(token)

    def answered(self, token: int) -> None:
        waiter = self.waiters.pop(token, None)
        if waiter is not None:
            waiter.set()

    def answer_all(self) -> None:
        for token in list(self.waiters):
            self.answered(token)
