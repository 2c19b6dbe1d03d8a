"""Kill -9 and resume ends exactly where an uninterrupted run ends; NaN stops the run cleanly."""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from relations.train import trainer
from tests import toy_task

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOTAL = 24


def _cmd(workdir):
  return [
    sys.executable,
    "-m",
    "relations.train",
    "--config",
    "tests/toy_task.py",
    "--workdir",
    workdir,
    f"--config.total_steps={TOTAL}",
    "--config.checkpoint_every=4",
    "--config.log_every=4",
  ]


def _final_params(workdir):
  mngr = ocp.CheckpointManager(os.path.join(workdir, "checkpoints"), item_names=("state", "meta"))
  step = mngr.latest_step()
  restored = mngr.restore(step, args=ocp.args.Composite(state=ocp.args.StandardRestore()))
  mngr.close()
  return step, restored["state"]["params"]


def _steps(workdir):
  d = os.path.join(workdir, "checkpoints")
  if not os.path.isdir(d):
    return []
  return sorted(int(n) for n in os.listdir(d) if n.isdigit())


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
  """Workdir of one uninterrupted run of TOTAL steps."""
  full = str(tmp_path_factory.mktemp("full") / "w")
  subprocess.run(_cmd(full), cwd=ROOT, check=True, capture_output=True, timeout=300)
  return full


def _assert_same_final_params(full, resumed):
  step_a, a = _final_params(full)
  step_b, b = _final_params(resumed)
  assert step_a == step_b == TOTAL
  for (path, x), (_, y) in zip(
    jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves_with_path(b)
  ):
    np.testing.assert_array_equal(x, y, err_msg=str(path))


@pytest.mark.slow
def test_sigterm_saves_exits_143_and_resume_matches_uninterrupted(tmp_path, full_run):
  run = str(tmp_path / "term")
  proc = subprocess.Popen(
    _cmd(run), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
  )
  deadline = time.time() + 240
  while time.time() < deadline and not _steps(run) and proc.poll() is None:
    time.sleep(0.05)
  proc.send_signal(signal.SIGTERM)
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == 143, err[-2000:]
  saved = _steps(run)
  assert saved and saved[-1] < TOTAL, f"expected to stop mid-run, saw checkpoints {saved}"
  # The preemption save is the step it stopped at, whether or not on the checkpoint grid.
  assert f"Preempted: checkpoint saved at step {saved[-1]}" in err, err[-2000:]
  with open(os.path.join(run, "train_summary.json")) as f:
    summary = json.load(f)
  assert summary["preempted"] is True and summary["final_step"] == saved[-1]
  out = subprocess.run(_cmd(run), cwd=ROOT, check=True, capture_output=True, text=True, timeout=300)
  assert f"Resumed from {run} at step {saved[-1]}" in out.stderr
  _assert_same_final_params(full_run, run)


@pytest.mark.slow
def test_sigkill_then_resume_matches_uninterrupted(tmp_path, full_run):
  env = dict(os.environ)
  full = full_run

  killed = str(tmp_path / "killed")
  proc = subprocess.Popen(
    _cmd(killed), cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
  )
  deadline = time.time() + 240
  while time.time() < deadline and not _steps(killed) and proc.poll() is None:
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()
  saved = _steps(killed)
  assert saved and saved[-1] < TOTAL, f"expected to kill mid-run, saw checkpoints {saved}"

  out = subprocess.run(
    _cmd(killed), cwd=ROOT, env=env, check=True, capture_output=True, text=True, timeout=300
  )
  assert f"Resumed from {killed} at step {saved[-1]}" in out.stderr
  _assert_same_final_params(full, killed)


def test_nonfinite_loss_names_step_and_metric_and_keeps_checkpoint(tmp_path):
  c = toy_task.get_config()
  c.total_steps = 8
  c.checkpoint_every = 1
  c.optax = dict(name="sgd", momentum=0.0, weight_decay=0.0, clip_norm=0.0)
  c.schedule = dict(lr=1e30, warmup_steps=0, decay="constant")  # diverges within two steps
  workdir = str(tmp_path / "nan")
  with pytest.raises(
    trainer.NonFiniteLossError, match=r"Non-finite metric '\w+' .* at step (\d+)"
  ) as err:
    trainer.train(c, workdir)
  bad_step = int(err.value.args[0].split("at step ")[1].split(";")[0])
  steps = _steps(workdir)
  assert steps and max(steps) == bad_step - 1
  _, params = _final_params(workdir)
  assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(params))


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_grad_accumulation_matches_full_batch(tmp_path):
  def run(name, accum):
    c = toy_task.get_config()
    c.total_steps = 3
    c.grad_accum_steps = accum
    c.optax = dict(name="sgd", momentum=0.9, weight_decay=0.0, clip_norm=0.0)
    c.schedule = dict(lr=0.05, warmup_steps=0, decay="constant")
    return jax.device_get(trainer.train(c, str(tmp_path / name)).state["params"])

  a, b = run("a", 1), run("b", 4)
  for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_load_pretrained_applies_after_fresh_init_only(tmp_path):
  def cfg(value, steps):
    c = toy_task.get_config()
    c.total_steps = steps
    c.checkpoint_every = 1
    c.init_head_bias = value
    c.schedule = dict(lr=0.0, warmup_steps=0, decay="constant")  # params stay as loaded
    c.optax = dict(name="sgd", momentum=0.0, weight_decay=0.0, clip_norm=0.0)
    return c

  workdir = str(tmp_path / "pre")
  first = trainer.train(cfg(0.25, 1), workdir)
  np.testing.assert_array_equal(
    jax.device_get(first.state["params"]["head"]["bias"]), np.full(4, 0.25, np.float32)
  )
  # Resuming must not re-apply an external checkpoint over trained weights.
  second = trainer.train(cfg(-7.0, 2), workdir)
  np.testing.assert_array_equal(
    jax.device_get(second.state["params"]["head"]["bias"]), np.full(4, 0.25, np.float32)
  )
