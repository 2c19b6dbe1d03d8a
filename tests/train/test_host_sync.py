"""The train loop waits on the devices only at log/check/checkpoint steps, and prefetches input."""

import jax
import numpy as np
import pytest

from relations.train import prefetch
from relations.train import trainer
from tests import toy_task


def test_no_host_sync_between_log_steps(tmp_path, monkeypatch):
  dispatched = []  # steps dispatched so far, at each host sync
  syncs = []
  real_make, real_get, real_ready = trainer.make_train_step, jax.device_get, jax.block_until_ready

  def make(*a, **kw):
    step = real_make(*a, **kw)

    def counted(state, batch):
      dispatched.append(1)
      return step(state, batch)

    return counted

  def get(x):
    syncs.append(len(dispatched))
    return real_get(x)

  def ready(x):
    syncs.append(len(dispatched))
    return real_ready(x)

  monkeypatch.setattr(trainer, "make_train_step", make)
  monkeypatch.setattr(jax, "device_get", get)
  monkeypatch.setattr(jax, "block_until_ready", ready)
  c = toy_task.get_config()
  c.total_steps, c.log_every, c.checkpoint_every = 12, 4, 12
  c.progress_every_seconds = 1e9  # the progress line prints (and syncs) at the last step only
  trainer.train(c, str(tmp_path / "run"))
  assert len(dispatched) == 12
  # Step 1 waits once (compilation, excluded from steps/s); then only log steps 4, 8, 12 and the
  # end of the run (final state read-back) touch the device values.
  between = [s for s in syncs if s not in (1, 4, 8, 12)]
  assert between == [], syncs
  assert {4, 8, 12} <= set(syncs)


def test_nonfinite_check_default_is_log_steps():
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  assert config_util.TRAINER_DEFAULTS["check_finite_every"] == 0
  config = config_util.load_config("configs/occlusion.py:tiny", ["check_finite_every=1"])
  assert config.check_finite_every == 1  # still settable per run
  with pytest.raises(ValueError, match="check_finite_every"):
    config_util.load_config("configs/occlusion.py:tiny", ["check_finite_every=-1"])


def test_prefetch_puts_ahead_in_order():
  log = []
  items = ((i, f"b{i}") for i in range(5))

  def put(b):
    log.append(("put", b))
    return b.upper()

  out = []
  for step, batch in prefetch.to_device(items, put, size=2):
    log.append(("use", batch))
    out.append((step, batch))
  assert out == [(i, f"B{i}") for i in range(5)]
  # Batch N+2 is transferred before batch N is used (two ahead), and nothing is lost at the end.
  assert log[:4] == [("put", "b0"), ("put", "b1"), ("put", "b2"), ("use", "B0")]
  assert [x for x in log if x[0] == "put"] == [("put", f"b{i}") for i in range(5)]
  with pytest.raises(ValueError):
    list(prefetch.to_device(iter([]), put, size=0))
  assert np.array_equal([s for s, _ in prefetch.to_device(iter([(7, "x")]), put)], [7])
