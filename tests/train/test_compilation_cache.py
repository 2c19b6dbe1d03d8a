"""A restart of the same config with the persistent compilation cache on compiles nothing."""

import json
import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_RUN = r"""
import json, sys
import jax
counts = {"hit": 0, "miss": 0}
def listen(event, **kw):
  if event == "/jax/compilation_cache/cache_hits":
    counts["hit"] += 1
  elif event == "/jax/compilation_cache/cache_misses":
    counts["miss"] += 1
jax.monitoring.register_event_listener(listen)
from relations.train import trainer
from tests import toy_task
c = toy_task.get_config()
c.total_steps, c.checkpoint_every = 2, 2
c.compilation_cache_dir = sys.argv[2]
trainer.train(c, sys.argv[1])
print("COUNTS " + json.dumps(counts))
"""


def _run(workdir, cache):
  env = dict(os.environ, PYTHONPATH=_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
  res = subprocess.run(
    [sys.executable, "-c", _RUN, workdir, cache],
    capture_output=True,
    text=True,
    env=env,
    cwd=_ROOT,
    check=False,
    timeout=600,
  )
  assert res.returncode == 0, res.stderr[-3000:]
  line = [x for x in res.stdout.splitlines() if x.startswith("COUNTS ")][-1]
  return json.loads(line[len("COUNTS ") :])


@pytest.mark.slow  # two fresh interpreters importing the trainer (~22 s on 2 cores)
def test_second_run_compiles_nothing(tmp_path):
  cache = str(tmp_path / "xla_cache")
  first = _run(str(tmp_path / "a"), cache)
  assert first["miss"] > 0 and os.listdir(cache)
  # A fresh workdir (same config): every program (init, train step) comes from the cache.
  second = _run(str(tmp_path / "b"), cache)
  assert second["miss"] == 0, second
  assert second["hit"] >= first["miss"]
