"""Fault case of issue 36: SIGTERM during a trainer's start-up (before its first step).

The task of this module is the toy task whose data source takes long to load (it sleeps after
touching a marker file), so the test can signal the trainer while it is loading data.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

from relations.train import workdir_lock
from tests import toy_task
from tests.toy_task import init_params, loss_fn, make_model, preprocess_train  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MARKER_ENV = "RELATIONS_TEST_STARTUP_MARKER"

_CONFIG = """
from tests import toy_task


def get_config(arg=None):
  c = toy_task.get_config()
  c.task = "tests.train.test_faults_startup"
  return c
"""


def make_train_source(config):
  """The toy source, after a long load (the window in which the test sends SIGTERM)."""
  with open(os.environ[MARKER_ENV], "w") as f:
    f.write("loading")
  time.sleep(300)
  return toy_task.make_train_source(config)


@pytest.mark.slow
def test_fault_sigterm_during_startup(tmp_path):
  config, workdir, marker = tmp_path / "cfg.py", str(tmp_path / "w"), str(tmp_path / "loading")
  config.write_text(_CONFIG)
  proc = subprocess.Popen(
    [sys.executable, "-m", "relations.train", "--config", str(config), "--workdir", workdir],
    cwd=ROOT,
    env={**os.environ, MARKER_ENV: marker},
    stdout=subprocess.PIPE,
    stderr=subprocess.PIPE,
    text=True,
  )
  try:
    deadline = time.time() + 240
    while not os.path.exists(marker) and proc.poll() is None and time.time() < deadline:
      time.sleep(0.1)
    assert os.path.exists(marker), "the trainer never reached its data loading"
    assert os.path.exists(os.path.join(workdir, workdir_lock.LOCK_NAME))  # start-up is under way
    t = time.perf_counter()
    proc.send_signal(signal.SIGTERM)  # the fault
    out, err = proc.communicate(timeout=60)
    took = time.perf_counter() - t
  finally:
    if proc.poll() is None:
      proc.kill()
      proc.wait()
  assert proc.returncode == 143, err
  assert took < 20, took  # not the 300 s the loading would still take
  assert err.strip().splitlines() == [
    (
      "[train] SIGTERM during start-up (before the first step): stopped; no step was trained, so "
      "there was nothing new to save. Rerun the same command to start again."
    )
  ]
  assert "Traceback" not in out + err and "finished at step" not in out
  # The lock released; nothing begun but config.json and the (empty) TensorBoard events file.
  assert [n for n in sorted(os.listdir(workdir)) if not n.startswith("events.out")] == [
    "config.json"
  ]
