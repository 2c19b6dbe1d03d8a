"""Throughput in the train logs (FLOPs from XLA's cost analysis, TFLOP/s, MFU) and the profiler."""

import glob
import logging
import os

import jax
import numpy as np
import pytest

from relations.train import checkpoint as ckpt_lib
from relations.train import config_util, perf, trainer
from tests import tb_events, toy_task


def _config(**kw):
  c = toy_task.get_config()  # unlocked: the trainer's defaults fill what it does not set
  c.total_steps, c.log_every, c.checkpoint_every = 4, 2, 4
  for k, v in kw.items():
    setattr(c, k, v)
  return c


def _flops_of_toy_step(c):
  """Per-device FLOPs of the toy step, straight from XLA: max(compiled, lowered / devices)."""
  s = trainer.setup(c)
  step = trainer.make_train_step(
    s["model"], s["task"], c, s["tx"], s["schedule"], s["state_sh"], s["batch_sh"], s["repl"]
  )
  state = ckpt_lib.abstract_of(s["state_shapes"], s["state_sh"])
  ex = toy_task.preprocess_train(s["stream"].source[0], np.random.default_rng(0), c)
  bs = c.input.batch_size
  batch = {
    k: jax.ShapeDtypeStruct((bs, *np.shape(v)), np.asarray(v).dtype, sharding=s["batch_sh"][k])
    for k, v in ex.items()
  }
  with jax.set_mesh(s["mesh"]):
    lowered = step.lower(state, batch)
    compiled = lowered.compile()
  n = len(jax.devices())
  return max(compiled.cost_analysis()["flops"], lowered.cost_analysis()["flops"] / n), n


@pytest.mark.slow
def test_logged_flops_tflops_and_mfu(tmp_path):
  c = _config(peak_tflops=2.0)  # a stated CPU "peak", so that MFU is logged
  trainer.train(c, str(tmp_path / "run"))
  ev = tb_events.read(str(tmp_path / "run"))
  flops, n = _flops_of_toy_step(c)
  assert flops > 1e6  # a ViT step: millions of FLOPs per device, not a stub
  # Logged at step 4 only: step 2 has no earlier log step to measure steps/s from.
  assert [s for s, _ in ev["train/flops_per_step_device"]] == [4]
  assert ev["train/flops_per_step_device"][0][1] == pytest.approx(flops, rel=1e-6)
  sps = ev["train/steps_per_sec"][0][1]
  assert ev["train/examples_per_sec"][0][1] == pytest.approx(sps * 16, rel=1e-5)
  assert ev["train/tflops_per_sec"][0][1] == pytest.approx(flops * n * sps / 1e12, rel=1e-5)
  assert ev["train/mfu"][0][1] == pytest.approx(flops * sps / 2e12, rel=1e-5)


@pytest.mark.slow
def test_no_mfu_without_a_peak_on_cpu(tmp_path, caplog):
  caplog.set_level(logging.INFO)
  with jax.log_compiles(True):
    trainer.train(_config(), str(tmp_path / "run"))
  # The cost analysis compiled the step ahead of its first call, which reused it (no 2nd compile).
  compiles = [r for r in caplog.records if "Finished XLA compilation of jit(step_fn)" in r.message]
  assert len(compiles) == 1, [r.message for r in compiles]
  ev = tb_events.read(str(tmp_path / "run"))
  assert "train/tflops_per_sec" in ev and "train/mfu" not in ev
  assert "MFU not logged: no peak TFLOP/s known for device kind 'cpu'" in caplog.text


def test_peak_table_and_override():
  assert perf.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0
  assert perf.peak_tflops("NVIDIA H100 PCIe") == 756.0
  assert perf.peak_tflops("TPU v5 lite") == 197.0
  assert perf.peak_tflops("cpu") is None
  assert perf.peak_tflops("cpu", override=1.5) == 1.5
  s = perf.StepPerf(1e9, 8, 100.0)
  assert s.scalars(2.0) == {
    "train/flops_per_step_device": 1e9,
    "train/tflops_per_sec": 1e9 * 8 * 2 / 1e12,
    "train/mfu": 1e9 * 2 / 100e12,
  }
  assert perf.StepPerf(None, 8, 100.0).scalars(2.0) == {}


@pytest.mark.slow
def test_profile_trace_of_configured_steps(tmp_path, monkeypatch):
  dispatched, marks = [], []
  real_make = trainer.make_train_step
  real_start, real_stop = jax.profiler.start_trace, jax.profiler.stop_trace

  def make(*a, **kw):
    step = real_make(*a, **kw)

    def counted(state, batch):
      dispatched.append(1)
      return step(state, batch)

    return counted

  def start(d, *a, **kw):
    marks.append(("start", len(dispatched), d))
    return real_start(d, *a, **kw)

  def stop():
    marks.append(("stop", len(dispatched)))
    return real_stop()

  monkeypatch.setattr(trainer, "make_train_step", make)
  monkeypatch.setattr(jax.profiler, "start_trace", start)
  monkeypatch.setattr(jax.profiler, "stop_trace", stop)
  run = tmp_path / "run"
  trainer.train(_config(total_steps=5, profile_steps="2:4"), str(run))
  # Started before the third step (step 2 -> 3), stopped after the fourth finished.
  assert marks == [("start", 2, str(run / "profile")), ("stop", 4)]
  traces = glob.glob(str(run / "profile" / "plugins" / "profile" / "*" / "*.xplane.pb"))
  assert len(traces) == 1 and os.path.getsize(traces[0]) > 0


@pytest.mark.parametrize("bad", ["4:2", "x", "1:2:3", "-1:3"])
def test_profile_steps_refused(bad):
  with pytest.raises(ValueError, match=f"profile_steps.*{bad!r}"):
    config_util.load_config("configs/occlusion.py:tiny", [f"profile_steps={bad}"])
