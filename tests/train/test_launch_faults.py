"""What a real launch throws at the trainer: preemption with input workers, a failing evaluator, a
batch the mesh cannot split, a node-local data_dir (issue 30).

All on the toy task (tests/toy_task.py) with `input.num_workers=2` where workers matter.
"""

import os
import random
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import orbax.checkpoint as ocp
import portpicker
import pytest

from relations.train import checkpoint as ckpt_lib
from relations.train import config_util
from relations.train import trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOTAL = 12


def _steps(workdir):
  d = os.path.join(workdir, "checkpoints")
  return sorted(int(n) for n in os.listdir(d) if n.isdigit()) if os.path.isdir(d) else []


def _final_params(workdir):
  """(step, [(path, numpy array)]) of the latest checkpoint, whatever topology saved it."""
  step = _steps(workdir)[-1]
  state_dir = os.path.join(workdir, "checkpoints", str(step), "state")
  shapes = ckpt_lib.read_shapes(state_dir)
  args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), shapes)
  restored = ocp.PyTreeCheckpointer().restore(
    state_dir, args=ocp.args.PyTreeRestore(restore_args=args)
  )
  return step, jax.tree_util.tree_leaves_with_path(restored["params"])


def _assert_bit_identical(a_dir, b_dir):
  (sa, a), (sb, b) = _final_params(a_dir), _final_params(b_dir)
  assert sa == sb == TOTAL
  for (path, x), (_, y) in zip(a, b):
    np.testing.assert_array_equal(x, y, err_msg=str(path))


# ------------------------------------------------------------------------------ evaluation failure


def _toy(*overrides):
  return config_util.load_config("tests/toy_task.py", list(overrides))


def test_eval_failure_keeps_checkpoint(tmp_path, capsys):
  c = _toy("total_steps=4", "checkpoint_every=2")
  with c.unlocked():
    c.evals = dict(bad=dict(type="tests.scripted_evaluator", every_steps=2, fail=True))
  result = trainer.train(c, str(tmp_path / "w"))
  # Each failed evaluation came after its step's checkpoint, and training went on to the end.
  assert result.step == 4 and _steps(str(tmp_path / "w")) == [2, 4]
  out = capsys.readouterr().out
  assert "[eval] bad at step 2: FAILED (RuntimeError: scorer unavailable at step 2" in out, out
  # With the flag, the first failure stops the run, its step's checkpoint already saved.
  with c.unlocked():
    c.eval_errors_fatal = True
  with pytest.raises(RuntimeError, match="scorer unavailable at step 2"):
    trainer.train(c, str(tmp_path / "fatal"))
  assert _steps(str(tmp_path / "fatal")) == [2]


def test_batch_not_divisible_refused(tmp_path):
  assert jax.device_count() == 8
  c = _toy("input.batch_size=12")
  t0 = time.perf_counter()
  with pytest.raises(ValueError, match=r"input.batch_size=12 does not divide over the 8 devices"):
    trainer.train(c, str(tmp_path / "w"))
  assert _steps(str(tmp_path / "w")) == []
  assert time.perf_counter() - t0 < 60  # refused up front, not after compiling the step


# ------------------------------------------------------------------------------ node-local data_dir


def _loopback_env(pid, port, devices=2):
  env = dict(os.environ)
  env.update(
    PYTHONPATH=ROOT,
    RELATIONS_COORDINATOR=f"127.0.0.1:{port}",
    RELATIONS_NUM_PROCESSES="2",
    RELATIONS_PROCESS_ID=str(pid),
    RELATIONS_INIT_TIMEOUT="120",
    XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
  )
  return env


def test_process_local_data_dir_refused(tmp_path):
  port = portpicker.pick_unused_port()
  procs = [
    subprocess.Popen(
      [
        sys.executable,
        "-m",
        "tests.train.mp_data_dir_driver",
        str(tmp_path / "shared"),
        str(tmp_path / "local"),
      ],
      cwd=ROOT,
      env=_loopback_env(pid, port),
      stdout=subprocess.PIPE,
      stderr=subprocess.STDOUT,
      text=True,
    )
    for pid in range(2)
  ]
  logs = [p.communicate(timeout=300)[0] for p in procs]
  for p, log in zip(procs, logs):
    assert p.returncode == 0, log[-3000:]
    assert "shared ok" in log, log[-3000:]
    # Process 1 does not see process 0's files: both refuse, naming the field and process 1.
    assert "refused: data.data_dir=" in log and "process(es) [1] of 2" in log, log[-3000:]
  assert os.listdir(tmp_path / "shared") == []  # the marker is removed


# ------------------------------------------------------------------------------ preemption


def _train_cmd(workdir, *extra):
  return [
    sys.executable,
    "-m",
    "relations.train",
    "--config",
    "tests/toy_task.py",
    "--workdir",
    workdir,
    f"--config.total_steps={TOTAL}",
    "--config.checkpoint_every=3",
    "--config.log_every=3",
    "--config.input.num_workers=2",
    *extra,
  ]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
  """Workdir of one uninterrupted one-process run with two input workers."""
  full = str(tmp_path_factory.mktemp("full") / "w")
  subprocess.run(
    _train_cmd(full),
    cwd=ROOT,
    check=True,
    capture_output=True,
    timeout=300,
    env=dict(os.environ, PYTHONPATH=ROOT),
  )
  return full


def _wait_for(cond, procs, timeout=240):
  deadline = time.time() + timeout
  while time.time() < deadline and not cond():
    assert all(p.poll() is None for p in procs), "a run ended before it was signalled"
    time.sleep(0.02)
  assert cond(), "the moment to signal never came"


def _signal_groups(procs):
  """SIGTERM to each process's whole group: the trainer and its input workers, as SLURM does."""
  for p in procs:
    os.killpg(p.pid, signal.SIGTERM)
  t0 = time.time()
  for p in procs:
    p.wait(timeout=max(1.0, 60 - (time.time() - t0)))
  return time.time() - t0


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["checkpoint_save", "evaluation"])
def test_preemption_with_workers_one_process(tmp_path, uninterrupted, moment):
  run = str(tmp_path / "w")
  extra = []
  if moment == "evaluation":
    extra = [
      "--config.evals={'slow': {'type': 'tests.scripted_evaluator', 'every_steps': 3, "
      "'seconds': 3.0}}"
    ]
  env = dict(os.environ, PYTHONPATH=ROOT)
  proc = subprocess.Popen(
    _train_cmd(run, *extra),
    cwd=ROOT,
    env=env,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.PIPE,
    text=True,
    start_new_session=True,
  )
  ckpts = os.path.join(run, "checkpoints")
  if moment == "checkpoint_save":  # while orbax writes a step's temporary directory
    _wait_for(lambda: os.path.isdir(ckpts) and any("tmp" in n for n in os.listdir(ckpts)), [proc])
  else:  # while the slow evaluation of a random checkpoint step runs
    n = random.choice([3, 6])
    _wait_for(lambda: os.path.exists(os.path.join(run, "eval", "slow", f"started_{n}")), [proc])
  seconds = _signal_groups([proc])
  err = proc.stderr.read()
  assert proc.returncode == 143 and seconds < 60, (proc.returncode, seconds, err[-2000:])
  saved = _steps(run)
  assert saved and saved[-1] < TOTAL and f"Preempted: checkpoint saved at step {saved[-1]}" in err
  subprocess.run(_train_cmd(run), cwd=ROOT, env=env, check=True, capture_output=True, timeout=300)
  _assert_bit_identical(uninterrupted, run)


def _two_processes(workdir, tag, tmp_path):
  port = portpicker.pick_unused_port()
  cmd = [
    *_train_cmd(
      workdir, "--config.preemption_sync_every=2", "--config.mesh=[('data', -1), ('fsdp', 2)]"
    ),
    "--distributed",
  ]
  return [
    subprocess.Popen(
      cmd,
      cwd=ROOT,
      env=_loopback_env(pid, port),
      stdout=subprocess.DEVNULL,
      stderr=open(tmp_path / f"{tag}{pid}.log", "w"),
      start_new_session=True,
    )
    for pid in range(2)
  ]


@pytest.mark.slow
def test_preemption_with_workers_two_processes(tmp_path):
  full, run = str(tmp_path / "full"), str(tmp_path / "w")
  ref = _two_processes(full, "full", tmp_path)
  assert [p.wait(timeout=400) for p in ref] == [0, 0]
  procs = _two_processes(run, "term", tmp_path)
  first = random.choice([3, 6])
  _wait_for(lambda: first in _steps(run), procs)
  seconds = _signal_groups(procs)
  logs = [open(tmp_path / f"term{i}.log").read() for i in range(2)]
  assert [p.returncode for p in procs] == [143, 143] and seconds < 60, (seconds, logs[0][-2000:])
  saved = _steps(run)
  assert saved and saved[-1] < TOTAL
  assert all(f"Preempted: checkpoint saved at step {saved[-1]}" in log for log in logs)
  resumed = _two_processes(run, "resume", tmp_path)
  assert [p.wait(timeout=400) for p in resumed] == [0, 0]
  _assert_bit_identical(full, run)
