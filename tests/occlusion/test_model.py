"""Occlusion ViT model and losses: shapes, ablation switches, exact loss values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.occlusion import losses
from relations.occlusion import model as occlusion_vit

TINY_VIT = dict(width=16, depth=1, mlp_dim=32, num_heads=2, patch_size=8, posemb_grid=(4, 4))


@pytest.mark.slow  # four model variants compiled; the other tests here keep the model fast-tier
@pytest.mark.parametrize(
  "hires,orientation,patch", [(True, True, 8), (False, True, 8), (True, False, 16), (True, True, 4)]
)
def test_shapes_and_switches(hires, orientation, patch):
  model = occlusion_vit.Model(
    vit_kw={**TINY_VIT, "patch_size": patch},
    head_dim=16,
    hires=hires,
    hires_channels=4,
    orientation=orientation,
  )
  x = jnp.zeros((2, 32, 48, 3))
  params = model.init(jax.random.key(0), x)["params"]
  out = model.apply({"params": params}, x)
  assert out["boundary_logits"].shape == (2, 32, 48)
  assert ("hires" in params) == hires
  assert ("orient" in params) == orientation
  if orientation:
    assert out["orientation_vec"].shape == (2, 32, 48, 2)
    o = out["orientation"]
    assert o.shape == (2, 32, 48) and bool(jnp.all(jnp.abs(o) <= np.pi))
  else:
    assert "orientation" not in out


def test_patch_size_must_divide_image():
  model = occlusion_vit.Model(vit_kw=TINY_VIT, head_dim=16)
  with pytest.raises(ValueError, match="not a multiple of the patch size"):
    model.init(jax.random.key(0), jnp.zeros((1, 30, 32, 3)))


def _bce(p, y):
  return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def test_hed_bce_exact_value():
  logits = np.array([[[0.0, 2.0], [-1.0, 1.0]]], np.float32)
  target = np.array([[[1.0, 0.0], [0.0, 0.0]]], np.float32)
  mask = np.array([[[1.0, 1.0], [1.0, 0.0]]], np.float32)  # last px: padding
  p = 1 / (1 + np.exp(-logits.astype(np.float64)))
  alpha = 2 / 3  # 2 of 3 real pixels are negatives
  want = (
    alpha * _bce(p[0, 0, 0], 1) + (1 - alpha) * (_bce(p[0, 0, 1], 0) + _bce(p[0, 1, 0], 0))
  ) / 3
  got = losses.hed_bce(logits, target, mask)
  assert float(got) == pytest.approx(want, rel=1e-6)


def test_attention_loss_exact_value():
  logits = np.array([[[0.5, -0.5, 1.5]]], np.float32)
  target = np.array([[[1.0, 0.0, 0.0]]], np.float32)
  mask = np.ones_like(target)
  p = 1 / (1 + np.exp(-logits.astype(np.float64)))[0, 0]
  alpha, beta, gamma = 2 / 3, 4.0, 0.5
  want = (
    alpha * beta ** ((1 - p[0]) ** gamma) * _bce(p[0], 1)
    + (1 - alpha) * beta ** (p[1] ** gamma) * _bce(p[1], 0)
    + (1 - alpha) * beta ** (p[2] ** gamma) * _bce(p[2], 0)
  ) / 3
  got = losses.attention_loss(logits, target, mask, beta, gamma)
  assert float(got) == pytest.approx(want, rel=1e-5)


def test_orientation_losses_wrap_and_use_valid_only():
  theta = np.array([[[np.pi - 0.1, 0.3, 2.0]]], np.float32)
  pred = np.array([-np.pi + 0.1, 0.3, -1.0])  # errors 0.2 (wrapped), 0, big
  vec = np.stack([np.cos(pred), np.sin(pred)], -1)[None, None] * 3.0
  valid = np.array([[[1.0, 1.0, 0.0]]], np.float32)  # last one not supervised
  cos = losses.orientation_loss(vec, theta, valid, "cosine")
  assert float(cos) == pytest.approx((1 - np.cos(0.2)) / 2, abs=1e-6)
  sl1 = losses.orientation_loss(vec, theta, valid, "smooth_l1")
  assert float(sl1) == pytest.approx(0.5 * 0.2**2 / 2, abs=1e-6)
  none = losses.orientation_loss(vec, theta, np.zeros_like(valid))
  assert float(none) == 0.0
  with pytest.raises(ValueError, match="unknown kind 'l2'"):
    losses.orientation_loss(vec, theta, valid, "l2")


def test_gradients_reach_every_parameter():
  model = occlusion_vit.Model(vit_kw=TINY_VIT, head_dim=16, hires_channels=4)
  x = jax.random.normal(jax.random.key(1), (2, 16, 16, 3))
  params = jax.jit(model.init)(jax.random.key(0), x)["params"]
  y = (jax.random.uniform(jax.random.key(2), (2, 16, 16)) < 0.1).astype(jnp.float32)

  def loss(p):
    out = model.apply({"params": p}, x)
    return losses.attention_loss(
      out["boundary_logits"], y, jnp.ones_like(y)
    ) + losses.orientation_loss(out["orientation_vec"], y * 1.0, y)

  # One compilation instead of op-by-op dispatch (34 s -> a few on 2 cores).
  grads = jax.device_get(jax.jit(jax.grad(loss))(params))
  norms = jax.tree.leaves(jax.tree.map(lambda g: float(np.abs(g).sum()), grads))
  assert all(np.isfinite(norms)) and all(n > 0 for n in norms)
