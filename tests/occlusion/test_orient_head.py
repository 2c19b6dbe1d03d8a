"""RealOOB's "edge detector + orientation head" protocol: OPNet loss, ViT and conv backbones."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.occlusion import losses
from relations.occlusion import task as occlusion
from relations.train import config_util


def test_opnet_loss_known_answers():
  theta = jnp.zeros((1, 2, 4))
  valid = jnp.zeros((1, 2, 4)).at[0, 0, :].set(1.0)  # 4 of 8 pixels supervise
  mask = jnp.ones((1, 2, 4))
  for deg, per in ((0, 0.0), (30, 0.5 * (2 - 2 * np.cos(np.pi / 6)) ** 2), (90, 1.5), (180, 3.5)):
    a = np.deg2rad(deg)
    vec = jnp.broadcast_to(jnp.array([np.cos(a), np.sin(a)]) * 3.0, (1, 2, 4, 2))  # any length
    got = losses.opnet_orientation_loss(vec, theta, valid, mask)
    assert float(got) == pytest.approx(4 * per / 8, abs=1e-6), deg  # mean over all 8 pixels


def _batch(h=32, w=32):
  rng = np.random.default_rng(0)
  b = (rng.random((1, h, w)) < 0.1).astype(np.float32)
  return {
    "image": rng.uniform(-1, 1, (1, h, w, 3)).astype(np.float32),
    "boundary": b,
    "orientation": rng.uniform(-np.pi, np.pi, (1, h, w)).astype(np.float32),
    "valid": b,
    "mask": np.ones((1, h, w), np.float32),
  }


def test_vit_with_orientation_head_structure():
  """ViT + head: shapes and parameter layout (eval_shape; the numerics are the conv case's)."""
  config = config_util.load_config("configs/occlusion.py:tiny,orient_head=opnet")
  assert config.loss.orientation == "opnet"
  model = occlusion.make_model(config)
  batch = _batch()
  params = jax.eval_shape(lambda: occlusion.init_params(model, batch, jax.random.key(0)))
  assert set(params) == {"edge", "head"} and "vit" in params["edge"]
  assert "orient" not in params["edge"]  # the ViT's fused orientation output is off
  # Multi-level: one projection per encoder block used (tiny depth 2: blocks 0 and 1).
  assert sorted(k for k in params["head"] if k.startswith("level")) == ["level0", "level1"]
  assert occlusion.vit_path(config) == ("edge", "vit")
  out = jax.eval_shape(lambda p: model.apply({"params": p}, batch["image"]), params)
  assert out["orientation_vec"].shape == (1, 32, 32, 2) and out["orientation"].shape == (1, 32, 32)
  loss, metrics = jax.eval_shape(
    lambda p: occlusion.loss_fn(model, p, batch, jax.random.key(1), config), params
  )
  assert loss.shape == () and "loss_orientation" in metrics


@pytest.mark.parametrize("arg, edge_key", [("tiny,edge=conv", "stage0_conv0")])
def test_headed_models_train_with_opnet_loss(arg, edge_key):
  config = config_util.load_config(f"configs/occlusion.py:{arg}")
  assert config.loss.orientation == "opnet" and config.model.orient_head == "opnet"
  model = occlusion.make_model(config)
  batch = _batch()

  # Parameters from numpy (the structure from eval_shape): compiling the
  # random initialisers costs more than the step itself on XLA:CPU.
  shapes = jax.eval_shape(lambda: occlusion.init_params(model, batch, jax.random.key(0)))
  rng = np.random.default_rng(0)
  params = jax.tree.map(lambda s: (0.2 * rng.standard_normal(s.shape)).astype(s.dtype), shapes)

  @jax.jit
  def run(params):  # one compile: forward, loss and gradient
    out = model.apply({"params": params}, batch["image"])
    (loss, metrics), g = jax.value_and_grad(
      lambda p: occlusion.loss_fn(model, p, batch, jax.random.key(1), config), has_aux=True
    )(params)
    return out, loss, metrics, g

  out, loss, metrics, g = run(params)
  assert set(params) == {"edge", "head"} and edge_key in params["edge"]
  assert "orient" not in params["edge"]  # the boundary branch keeps no orientation output
  assert out["boundary_logits"].shape == (1, 32, 32)
  assert out["orientation_vec"].shape == (1, 32, 32, 2)
  np.testing.assert_allclose(
    out["orientation"],
    np.arctan2(out["orientation_vec"][..., 1], out["orientation_vec"][..., 0]),
    atol=1e-6,
  )
  want = losses.opnet_orientation_loss(
    out["orientation_vec"], batch["orientation"], batch["valid"], batch["mask"]
  )
  assert float(metrics["loss_orientation"]) == pytest.approx(float(want), rel=1e-5)
  assert np.isfinite(float(loss))
  # The head learns from the orientation loss; every parameter gets a finite gradient.
  assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(g))
  assert float(jnp.abs(g["head"]["out"]["kernel"]).sum()) > 0


def test_conv_edge_detector_boundary_only_and_default_unchanged():
  config = config_util.load_config("configs/occlusion.py:tiny,edge=conv,orient=false")
  model = occlusion.make_model(config)
  batch = _batch()
  out = jax.eval_shape(
    lambda: model.apply(
      {"params": occlusion.init_params(model, batch, jax.random.key(0))}, batch["image"]
    )
  )
  assert set(out) == {"boundary_logits"} and out["boundary_logits"].shape == (1, 32, 32)
  default = config_util.load_config("configs/occlusion.py:tiny")
  assert default.model.orient_head == "fused" and occlusion.vit_path(default) == ("vit",)
  p = jax.eval_shape(
    lambda: occlusion.init_params(occlusion.make_model(default), batch, jax.random.key(0))
  )
  assert "vit" in p and "orient" in p
