"""The paper configs' real train steps (relations.train.trainer.make_train_step).

* No task's step calls back into the host: each paper config's step is lowered and its
  custom_call targets are searched for host callbacks (a jax.pure_callback is caught).
* occlusion `B/16` and video_relations `paper` train 2 steps at their real input shapes
  (batch 2) from an imported AugReg-layout .npz backbone, through the trainer's own
  `_maybe_load_pretrained` and step. To stay within this machine's memory and a CI minute, the
  ViT depth is overridden to 2 (width, heads, patch, grid and resolution are the paper's), and the
  inputs are random arrays of the preprocessed shapes rather than built datasets.
"""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.nn import vit

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
  "paper_configs", os.path.join(_ROOT, "bench", "paper_configs.py")
)
paper_configs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper_configs)


def test_host_callback_detector_sees_pure_callback():
  def f(x):
    return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

  text = jax.jit(f).lower(jnp.zeros(3)).as_text()
  assert paper_configs.host_callbacks(text), text


@pytest.mark.parametrize("task", sorted(paper_configs.PAPER))
def test_paper_step_has_no_host_callback(task):
  config = paper_configs.paper_config(task)
  step, state, batch, _ = paper_configs.build_step(config, jax.devices()[:1], batch_size=2)
  text = step.lower(state, batch).as_text()
  assert "custom_call" in text or "stablehlo" in text
  assert paper_configs.host_callbacks(text) == []


def _augreg_npz(path, vit_params, rng):
  """Random values in the AugReg layout (CLS position in a 14 x 14 + 1 table, old names)."""
  ckpt = {}
  for k, v in vit.flatten_params(vit_params).items():
    k = k.replace("MultiHeadDotProductAttention_0", "MultiHeadDotProductAttention_1")
    k = k.replace("/LayerNorm_1/", "/LayerNorm_2/").replace("/MlpBlock_0/", "/MlpBlock_3/")
    shape = v.shape
    if k == "pos_embedding":
      k, shape = "Transformer/posembed_input/pos_embedding", (1, 197, v.shape[-1])
    ckpt[k] = (0.05 * rng.standard_normal(shape)).astype(np.float32)
  np.savez(path, **ckpt)


@pytest.mark.parametrize("task,prefix", [("occlusion", "vit"), ("video_relations", "encoder")])
def test_paper_config_trains_from_imported_backbone(tmp_path, task, prefix):
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  config = paper_configs.paper_config(task)
  with config.unlocked():
    config.model.vit.depth = 2
  step, _, batch, p = paper_configs.build_step(config, jax.devices()[:1], batch_size=2)
  with jax.set_mesh(p["mesh"]):
    state = jax.jit(p["init_fn"], out_shardings=p["state_sh"])(jax.random.key(0))
    random_init = jax.device_get(state["params"])
    path = str(tmp_path / "backbone.npz")
    _augreg_npz(path, random_init[prefix], np.random.default_rng(1))
    with config.unlocked():
      config.model.init_from = path
    state = trainer._maybe_load_pretrained(p["task"], config, state, p["state_sh"])  # pylint: disable=protected-access
    imported = jax.device_get(state["params"])
    ckpt = np.load(path)
    k = "Transformer/encoderblock_1/MlpBlock_3/Dense_0/kernel"
    np.testing.assert_array_equal(
      imported[prefix]["Transformer"]["encoderblock_1"]["MlpBlock_0"]["Dense_0"]["kernel"], ckpt[k]
    )
    arrays = {
      k: jax.device_put(v, p["batch_sh"][k])
      for k, v in paper_configs.random_batch(batch, seed=2).items()
    }
    rng = jax.random.fold_in(jax.random.key(int(config.seed)), 0)
    loss_fn = jax.jit(lambda prm, b: p["task"].loss_fn(p["model"], prm, b, rng, config)[0])
    direct = float(loss_fn(imported, arrays))
    at_init = float(loss_fn(random_init, arrays))
    losses = []
    for _ in range(2):
      state, metrics = step(state, arrays)
      losses.append(float(metrics["loss"]))
  assert np.isfinite(losses).all(), losses
  # The first step's loss is the forward pass with the imported weights, not the random init's.
  assert losses[0] == pytest.approx(direct, rel=1e-5, abs=1e-6)
  assert abs(at_init - direct) > 1e-3 * abs(direct)
  assert int(state["step"]) == 2
