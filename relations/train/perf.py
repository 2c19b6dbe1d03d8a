"""Throughput figures of the train step (FLOPs, TFLOP/s, MFU) and the profiler hook.

FLOPs come from XLA's cost analysis of the train step itself, once per run (no extra compile:
`jit.lower(...).compile()` fills the same cache the jitted call uses):

* the compiled (SPMD-partitioned) module reports the FLOPs of one device's program;
* the lowered (global, unoptimised) module reports the FLOPs of the whole step; divided by the
  device count it is the per-device figure too. XLA:GPU's compiled analysis counts library GEMMs
  (cuBLAS / Triton fusions) as ~0 FLOPs, so the larger of the two per-device figures is used.

XLA counts a `while` loop's body once, whatever its trip count; with `grad_accum_steps = k` the
gradient scan is one such loop, so the figure is multiplied by k (this over-counts the optimizer
update, small next to k forward/backward passes, k-1 times).

MFU = per-device FLOPs per step x steps/s / the device's dense bfloat16 peak (`PEAK_TFLOPS`, by
`device_kind`, or the config's `peak_tflops` > 0). A device with no known peak (the CPU) gets no
MFU unless `peak_tflops` is set; the run says so once in the log.

`profile_steps = "S:E"` records a `jax.profiler` trace of the steps that take the run from step S
to step E into `<workdir>/profile/` (TensorBoard's profile plugin or Perfetto read it).
"""

from __future__ import annotations

import os
from typing import Any

import jax
from absl import logging

from relations.train import config_util

# Dense bfloat16 peak per chip, TFLOP/s (vendor datasheets), matched in order on the lower-cased
# `device_kind` (more specific names first: "h100 pcie" before "h100").
PEAK_TFLOPS = (
  ("h100 pcie", 756.0),
  ("gh200", 989.0),
  ("h100", 989.0),
  ("h200", 989.0),
  ("h800", 989.0),
  ("b200", 2250.0),
  ("a100", 312.0),
  ("a800", 312.0),
  ("l40s", 362.0),
  ("l4", 121.0),
  ("a10", 125.0),
  ("v100", 125.0),
  ("tpu v6 lite", 918.0),
  ("tpu v6e", 918.0),
  ("tpu v5 lite", 197.0),
  ("tpu v5e", 197.0),
  ("tpu v5p", 459.0),
  ("tpu v5", 459.0),
  ("tpu v4", 275.0),
  ("tpu v3", 123.0),
)


def peak_tflops(device_kind: str, override: float = 0.0) -> float | None:
  """Per-device dense bf16 peak in TFLOP/s: `override` if > 0, else the table, else None."""
  if override and override > 0:
    return float(override)
  kind = str(device_kind).lower()
  for key, value in PEAK_TFLOPS:
    if key in kind:
      return value
  return None


def _flops(stage) -> float:
  """The `flops` entry of a Lowered/Compiled stage's cost analysis (0 when XLA gives none)."""
  try:
    cost = stage.cost_analysis()
  except Exception:  # noqa: BLE001  (backends without a cost model)
    return 0.0
  cost = cost[0] if isinstance(cost, (list, tuple)) else (cost or {})
  return float(cost.get("flops", 0.0))


def step_flops(step_fn, args: tuple, n_devices: int, grad_accum_steps: int = 1) -> float | None:
  """Per-device FLOPs of one call of the jitted `step_fn(*args)` (module docstring).

  None when `step_fn` is not a jitted function (e.g. a test's wrapper) or XLA reports nothing.
  """
  if not hasattr(step_fn, "lower"):
    return None
  lowered = step_fn.lower(*args)
  compiled = lowered.compile()
  flops = max(_flops(compiled), _flops(lowered) / max(1, int(n_devices)))
  return flops * max(1, int(grad_accum_steps)) if flops > 0 else None


class StepPerf:
  """Turns steps/s into the logged `train/tflops_per_sec` (all devices) and `train/mfu`.

  Args:
    flops_per_device: per-device FLOPs of one step (`step_flops`), or None (nothing logged).
    n_devices: devices the step runs on.
    peak: per-device peak TFLOP/s (`peak_tflops`), or None (no MFU).
  """

  def __init__(self, flops_per_device: float | None, n_devices: int, peak: float | None):
    self.flops, self.n, self.peak = flops_per_device, int(n_devices), peak

  @classmethod
  def for_step(cls, step_fn, args, config, devices) -> StepPerf:
    """Analyses the step; logs its FLOPs and, where no peak is known, why MFU is omitted."""
    devices = list(devices)
    flops = step_flops(step_fn, args, len(devices), int(config.get("grad_accum_steps", 1)))
    kind = devices[0].device_kind
    peak = peak_tflops(kind, float(config.get("peak_tflops", 0.0) or 0.0))
    if flops is None:
      logging.info("Train step FLOPs unknown (no XLA cost analysis): no TFLOP/s or MFU logged")
    else:
      logging.info("Train step: %.4g FLOPs per device (XLA cost analysis)", flops)
      if peak is None:
        logging.info(
          "MFU not logged: no peak TFLOP/s known for device kind %r (set --config.peak_tflops)",
          kind,
        )
    return cls(flops, len(devices), peak)

  def scalars(self, steps_per_sec: float) -> dict[str, float]:
    """{train/flops_per_step_device, train/tflops_per_sec[, train/mfu]} at `steps_per_sec`."""
    if not self.flops:
      return {}
    out = {
      "train/flops_per_step_device": self.flops,
      "train/tflops_per_sec": self.flops * self.n * steps_per_sec / 1e12,
    }
    if self.peak:
      out["train/mfu"] = self.flops * steps_per_sec / (self.peak * 1e12)
    return out


class Profiler:
  """A `jax.profiler` trace of the steps (S, E] of `profile_steps` into `<workdir>/profile/`.

  `before(step)` runs before the step that takes the run from `step` to `step + 1`, `after(done,
  state)` after it; the trace stops once step E is finished on the devices (the only host sync
  it adds). With several processes each writes `profile/process_<i>/`.
  """

  def __init__(self, spec: str, workdir: str):
    self.range = config_util.parse_profile_steps(spec)
    self.dir = os.path.join(workdir, "profile")
    if jax.process_count() > 1:
      self.dir = os.path.join(self.dir, f"process_{jax.process_index()}")
    self.active = False

  def before(self, step: int) -> None:
    if self.range and not self.active and self.range[0] <= step < self.range[1]:
      jax.profiler.start_trace(self.dir)
      self.active = True
      logging.info("Profiling steps %d..%d into %s", step, self.range[1], self.dir)

  def after(self, done: int, state: Any) -> None:
    if self.active and done >= self.range[1]:
      self.close(state)

  def close(self, state: Any) -> None:
    """Stops a trace still running (the run ended or was preempted inside the range)."""
    if self.active:
      jax.block_until_ready(state)
      jax.profiler.stop_trace()
      self.active = False
