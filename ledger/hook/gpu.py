"""NVML samples of a rank's GPU, taken in the writer process every few seconds.

`nvidia-ml-py` (module `pynvml`) is optional (`pip install 'ledger[gpu]'`). Where it is
missing, or NVML cannot start (no driver, no GPU), nothing is sampled and the writer says
so once. A reading that fails costs that field (NULL), never the sample.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime
from typing import Any

# Clock throttle (or "clock event") reasons, as NVML's bit masks name them.
THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal",
    0x40: "hw_thermal",
    0x80: "hw_power_brake",
    0x100: "display_clocks",
}


log = logging.getLogger("ledger.hook")


class Sampler:
    """Reads one GPU through NVML; `start()` says why it cannot, or None.

    `failures` counts the readings NVML refused (each a NULL field of its sample);
    `refused` counts them by NVML call, and the first refusal of each is logged with its
    reason (the writer warns with the total)."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: dict[int, Any] = {}
        self.failures = 0
        self.refused: dict[str, int] = {}

    def start(self) -> str | None:
        try:
            import pynvml
        except ImportError:
            return "nvidia-ml-py is not installed (pip install 'ledger[gpu]')"
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            return f"NVML did not start ({exc})"
        self._nvml = pynvml
        return None

    def stop(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:  # shutting down: nothing left to lose, but said
                log.debug("ledger.hook: nvmlShutdown failed (%r)", exc)
            self._nvml = None

    def sample(self, device: int, *, rank: int, step: int | None) -> dict[str, Any] | None:
        """One gpu_sample row for CUDA device `device` of this process, or None."""
        nvml = self._nvml
        if nvml is None:
            return None
        handle = self._handle(device)
        if handle is None:
            return None
        row: dict[str, Any] = {
            "gpu_index": device,
            "rank": rank,
            "step": step,
            "sampled_at": datetime.now(UTC),
        }
        name = self._read(nvml.nvmlDeviceGetName, handle)
        row["name"] = name.decode() if isinstance(name, bytes) else name
        memory = self._read(nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is not None:
            row["memory_used_mib"] = memory.used / (1 << 20)
            row["memory_total_mib"] = memory.total / (1 << 20)
        rates = self._read(nvml.nvmlDeviceGetUtilizationRates, handle)
        row["utilization_pct"] = float(rates.gpu) if rates is not None else None
        row["power_w"] = _milli(self._read(nvml.nvmlDeviceGetPowerUsage, handle))
        row["power_limit_w"] = _milli(self._read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle))
        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        row["sm_clock_mhz"] = _float(self._read(nvml.nvmlDeviceGetClockInfo, handle, sm))
        row["max_sm_clock_mhz"] = _float(self._read(nvml.nvmlDeviceGetMaxClockInfo, handle, sm))
        gpu_sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        row["temperature_c"] = _float(self._read(nvml.nvmlDeviceGetTemperature, handle, gpu_sensor))
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        mask = self._read(reasons, handle) if reasons is not None else None
        if isinstance(mask, int):
            row["throttle"] = ",".join(n for bit, n in THROTTLE_BITS.items() if mask & bit)
        return row

    def _read(self, call: Any, *args: Any) -> Any:
        """One NVML reading; a refused one is counted and costs its field alone."""
        try:
            return call(*args)
        except Exception as exc:  # this field is NULL; counted, and said once per call
            self.failures += 1
            name = str(getattr(call, "__name__", call))
            seen = self.refused.get(name, 0)
            self.refused[name] = seen + 1
            if not seen:
                log.debug("ledger.hook: NVML refused %s (%r); that field is left empty", name, exc)
            return None

    def _handle(self, device: int) -> Any:
        if device in self._handles:
            return self._handles[device]
        nvml = self._nvml
        visible = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
        visible = [d for d in visible if d]
        target = visible[device] if device < len(visible) else str(device)
        try:
            if target.isdigit():
                handle = nvml.nvmlDeviceGetHandleByIndex(int(target))
            else:  # a UUID (GPU-…, MIG-…)
                handle = nvml.nvmlDeviceGetHandleByUUID(target)
        except Exception as exc:  # no such GPU here: no samples for it, said once
            self.failures += 1
            log.info("ledger.hook: NVML has no GPU %s (%r); it is not sampled", target, exc)
            handle = None
        self._handles[device] = handle
        return handle


def _milli(value: Any) -> float | None:
    return value / 1000.0 if isinstance(value, int | float) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
