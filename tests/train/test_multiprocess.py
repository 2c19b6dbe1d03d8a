"""Two JAX processes over loopback train the same run, checkpoint once, and resume."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import portpicker
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _start(workdir, steps, tmp_path, tag, overrides=()):
  port = portpicker.pick_unused_port()
  procs, outs = [], []
  for pid in range(2):
    env = dict(os.environ)
    env.update(
      RELATIONS_COORDINATOR=f"127.0.0.1:{port}",
      RELATIONS_NUM_PROCESSES="2",
      RELATIONS_PROCESS_ID=str(pid),
      RELATIONS_INIT_TIMEOUT="120",
      XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    out = str(tmp_path / f"{tag}_p{pid}.npz")
    outs.append(out)
    procs.append(
      subprocess.Popen(
        [sys.executable, "-m", "tests.train.mp_driver", workdir, str(steps), out, *overrides],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  return procs, outs


def _finish(procs, outs):
  logs = []
  for p in procs:
    try:
      logs.append(p.communicate(timeout=400)[0])
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
  for p, log in zip(procs, logs):
    assert p.returncode == 0, log[-3000:]
  return [dict(np.load(o)) for o in outs], logs


def _launch(workdir, steps, tmp_path, tag):
  return _finish(*_start(workdir, steps, tmp_path, tag))


@pytest.mark.slow
def test_two_processes_train_identically_and_resume(tmp_path):
  workdir = str(tmp_path / "w")
  (a, b), _ = _launch(workdir, 4, tmp_path, "first")
  assert int(a["step"]) == int(b["step"]) == 4
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)
  # One checkpoint directory per step, written jointly (not once per process).
  steps = sorted(os.listdir(os.path.join(workdir, "checkpoints")))
  assert steps == ["2", "4"], steps
  # A second launch resumes from step 4 on both processes and continues to 6.
  (c, d), logs = _launch(workdir, 6, tmp_path, "second")
  assert all(f"Resumed from {workdir} at step 4" in log for log in logs)
  assert int(c["step"]) == int(d["step"]) == 6
  for k in c:
    np.testing.assert_array_equal(c[k], d[k], err_msg=k)
  assert any(not np.array_equal(a[k], c[k]) for k in a)


@pytest.mark.slow
def test_sigterm_on_one_process_stops_both_at_the_same_step(tmp_path):
  workdir = str(tmp_path / "w")
  procs, outs = _start(
    workdir, 400, tmp_path, "term", ["checkpoint_every=2", "preemption_sync_every=5"]
  )
  ckpts = os.path.join(workdir, "checkpoints")
  deadline = time.time() + 300
  while time.time() < deadline and not (
    os.path.isdir(ckpts) and any(n.isdigit() for n in os.listdir(ckpts))
  ):
    if any(p.poll() is not None for p in procs):
      break
    time.sleep(0.05)
  # Only process 0 is signalled, as when a pod's hosts are preempted at
  # different moments.
  procs[0].send_signal(signal.SIGTERM)
  (a, b), logs = _finish(procs, outs)
  step = int(a["step"])
  assert step == int(b["step"]) and step % 5 == 0 and step < 400, step
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)
  for pid, log in enumerate(logs):
    assert f"process {pid} finished at step {step}, preempted=True" in log, log[-2000:]
  steps = sorted(int(n) for n in os.listdir(ckpts) if n.isdigit())
  assert steps[-1] == step, steps
