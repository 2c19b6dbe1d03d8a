"""The same training run on a 1-device mesh and on an 8-device data x fsdp mesh."""

import jax
import numpy as np

from relations.train import sharding
from relations.train import trainer
from tests import toy_task


def _run(tmp_path, name, mesh, devices):
  c = toy_task.get_config()
  c.mesh = mesh
  c.total_steps = 4
  c.checkpoint_every = 100
  # SGD with momentum: Adam's 1/sqrt(v) turns float noise in near-zero gradients into
  # lr-sized steps, which would hide a real sharding bug behind a loose tolerance.
  c.optax = dict(name="sgd", momentum=0.9, weight_decay=1e-4, clip_norm=1.0)
  c.schedule = dict(lr=0.05, warmup_steps=0, decay="constant")
  r = trainer.train(c, str(tmp_path / name), devices=devices)
  return r


def test_one_device_equals_data_fsdp_mesh(tmp_path):
  assert jax.device_count() == 8
  one = _run(tmp_path, "one", [("data", 1), ("fsdp", 1)], jax.devices()[:1])
  eight = _run(tmp_path, "eight", [("data", 4), ("fsdp", 2)], None)
  # The 8-device run really is sharded: some kernel is split over the fsdp axis.
  specs = {str(x.sharding.spec) for x in jax.tree.leaves(eight.state["params"])}
  assert any("fsdp" in s for s in specs), specs
  p1 = jax.device_get(one.state["params"])
  p8 = jax.device_get(eight.state["params"])
  flat1 = jax.tree_util.tree_leaves_with_path(p1)
  flat8 = dict(jax.tree_util.tree_leaves_with_path(p8))
  for path, a in flat1:
    np.testing.assert_allclose(a, flat8[path], rtol=1e-5, atol=1e-6, err_msg=str(path))
  assert one.step == eight.step == 4


def test_mesh_sizes_and_rules():
  mesh = sharding.make_mesh([("data", -1), ("fsdp", 2)])
  assert dict(mesh.shape) == {"data": 4, "fsdp": 2}
  spec = sharding.spec_for("params/x/kernel", (64, 30), [(".*", "fsdp")], mesh, 16)
  assert spec == jax.sharding.PartitionSpec("fsdp", None)
  spec = sharding.spec_for("params/x/bias", (3,), [(".*", "fsdp")], mesh, 16)
  assert spec == jax.sharding.PartitionSpec()
  spec = sharding.spec_for("a/b", (4, 4), [("b$", (None, "data"))], mesh, 16)
  assert spec == jax.sharding.PartitionSpec(None, "data")
  import pytest

  with pytest.raises(ValueError, match="do not divide"):
    sharding.make_mesh([("data", -1), ("fsdp", 3)])
