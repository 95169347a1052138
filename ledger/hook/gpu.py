"""NVML samples of a rank's GPU, taken in the writer process every few seconds.

`nvidia-ml-py` (module `pynvml`) is optional (`pip install 'ledger[gpu]'`). Where it is
missing, or NVML cannot start (no driver, no GPU), nothing is sampled and the writer says
so once. A reading that fails costs that field (NULL), never the sample.
"""

from __future__ import annotations

import contextlib
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


class Sampler:
    """Reads one GPU through NVML; `start()` says why it cannot, or None."""

    def __init__(self) -> None:
        self._nvml: Any = None
        self._handles: dict[int, Any] = {}

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
            with contextlib.suppress(Exception):  # shutting down: nothing left to lose
                self._nvml.nvmlShutdown()
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
        name = _read(nvml.nvmlDeviceGetName, handle)
        row["name"] = name.decode() if isinstance(name, bytes) else name
        memory = _read(nvml.nvmlDeviceGetMemoryInfo, handle)
        if memory is not None:
            row["memory_used_mib"] = memory.used / (1 << 20)
            row["memory_total_mib"] = memory.total / (1 << 20)
        rates = _read(nvml.nvmlDeviceGetUtilizationRates, handle)
        row["utilization_pct"] = float(rates.gpu) if rates is not None else None
        row["power_w"] = _milli(_read(nvml.nvmlDeviceGetPowerUsage, handle))
        row["power_limit_w"] = _milli(_read(nvml.nvmlDeviceGetEnforcedPowerLimit, handle))
        sm = getattr(nvml, "NVML_CLOCK_SM", 1)
        row["sm_clock_mhz"] = _float(_read(nvml.nvmlDeviceGetClockInfo, handle, sm))
        row["max_sm_clock_mhz"] = _float(_read(nvml.nvmlDeviceGetMaxClockInfo, handle, sm))
        gpu_sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        row["temperature_c"] = _float(_read(nvml.nvmlDeviceGetTemperature, handle, gpu_sensor))
        reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )
        mask = _read(reasons, handle) if reasons is not None else None
        if isinstance(mask, int):
            row["throttle"] = ",".join(n for bit, n in THROTTLE_BITS.items() if mask & bit)
        return row

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
        except Exception:
            handle = None
        self._handles[device] = handle
        return handle


def _read(call: Any, *args: Any) -> Any:
    try:
        return call(*args)
    except Exception:
        return None


def _milli(value: Any) -> float | None:
    return value / 1000.0 if isinstance(value, int | float) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None
