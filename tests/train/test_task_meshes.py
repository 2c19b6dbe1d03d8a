"""Each task's tiny config, through its real builder and the shared trainer,
trains to the same parameters on 1 device and on an 8-device data x fsdp
mesh with every parameter large enough sharded over fsdp.

tests/train/test_sharded_step.py checks the trainer itself on a toy model;
this checks what the tasks add (their models, losses with host callbacks,
input pipelines) under the sharding a TPU pod run would use.
"""

import copy
import os

import jax
import ml_collections
import numpy as np
import pytest

from relations.train import config_util
from relations.train import trainer


def _train(config, workdir, mesh, devices):
  c = copy.deepcopy(config)
  with c.unlocked():
    c.mesh = mesh
    c.total_steps = 2
    c.checkpoint_every = 100
    c.log_every = 1
    c.evals = ml_collections.ConfigDict()
    # Shard every leaf that has a dimension divisible by 2 (tiny models have
    # few leaves above the default threshold).
    c.fsdp_min_size = 64
    # SGD: Adam's 1/sqrt(v) would turn float noise in near-zero gradients
    # into lr-sized steps and hide a real difference behind a tolerance.
    c.optax = dict(name="sgd", momentum=0.9, weight_decay=0.0, clip_norm=1.0)
    c.schedule = dict(lr=0.05, warmup_steps=0, decay="constant")
    c.input.batch_size = 8
  return trainer.train(c, workdir, devices=devices)


def _assert_mesh_invariant(config, tmp_path):
  assert jax.device_count() == 8
  one = _train(config, str(tmp_path / "one"), [("data", 1), ("fsdp", 1)], jax.devices()[:1])
  eight = _train(config, str(tmp_path / "eight"), [("data", 4), ("fsdp", 2)], None)
  assert one.step == eight.step == 2
  specs = [str(x.sharding.spec) for x in jax.tree.leaves(eight.state["params"])]
  assert sum("fsdp" in s for s in specs) > len(specs) // 3, specs
  p1 = jax.device_get(one.state["params"])
  p8 = dict(jax.tree_util.tree_leaves_with_path(jax.device_get(eight.state["params"])))
  moved = 0
  for path, a in jax.tree_util.tree_leaves_with_path(p1):
    np.testing.assert_allclose(
      a, p8[path], rtol=2e-5, atol=2e-6, err_msg=jax.tree_util.keystr(path)
    )
    moved += int(np.any(a != 0))
  assert moved > 0


# Each trains a task twice (1 device, 8-device mesh); the tasks' own tiny end-to-end tests stay
# in the fast tier.
@pytest.mark.slow
def test_occlusion_tiny(tmp_path):
  from relations.occlusion.data.occlusion_boundaries import make_dummy_data  # pylint: disable=g-import-not-at-top

  config = config_util.load_config(
    "configs/occlusion.py:tiny",
    [
      f"data.data_dir={tmp_path / 'tfds'}",
      f"data.manual_dir={make_dummy_data.HERE}",
      "input.crop_size=(32, 32)",
    ],
  )
  _assert_mesh_invariant(config, tmp_path)


@pytest.mark.slow
def test_video_relations_tiny(tmp_path):
  from relations.video_relations.data import synthetic as synthetic_vidor  # pylint: disable=g-import-not-at-top

  raw = str(tmp_path / "raw")
  synthetic_vidor.generate(raw, 4, 1, seed=5, min_frames=40, max_frames=48)
  config = config_util.load_config(
    "configs/video_relations.py:tiny",
    [
      f"data.data_dir={tmp_path / 'tfds'}",
      f"data.manual_dir={raw}",
      # A smaller graph than `tiny` compiles faster; same code paths.
      "model.vit.depth=1",
      "model.det_layers=1",
      "input.image_size=(48, 64)",
      "model.num_queries=8",
    ],
  )
  _assert_mesh_invariant(config, tmp_path)


@pytest.mark.slow
def test_commonsense_tiny(tmp_path):
  from relations.commonsense.data import synthetic as synthetic_commonsense  # pylint: disable=g-import-not-at-top
  from relations.commonsense import demo  # pylint: disable=g-import-not-at-top

  root = str(tmp_path)
  synthetic_commonsense.generate(
    os.path.join(root, "data"), seed=1, train_images=6, val_images=2, test_images=2, verbose=False
  )
  config = demo.demo_config(root)
  _assert_mesh_invariant(config, tmp_path)
