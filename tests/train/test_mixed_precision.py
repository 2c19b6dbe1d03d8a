"""Mixed precision and rematerialisation: bf16 compute, f32 parameters, same losses and gradients.

The tiny configs' real train steps (trainer.make_train_step via bench/paper_configs.build_step) at
batch 2 on random batches of the right shapes, from the same initial parameters.
"""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.nn import vit
from relations.train import config_util
from relations.train import precision

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
  "paper_configs", os.path.join(_ROOT, "bench", "paper_configs.py")
)
paper_configs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper_configs)

TINY = {
  "occlusion": ("configs/occlusion.py:tiny", []),
  "video_relations": ("configs/video_relations.py:tiny", []),
  "commonsense": ("configs/commonsense.py:tiny", ["model.lm.vocab_size=1024"]),
}
# bf16 keeps 8 mantissa bits (relative rounding 2^-9 = 0.2% per operation); after a forward and
# backward pass through these small models the first-step loss moves by well under 1%.
LOSS_RTOL = 1e-2


def _one_step(task, dtype):
  spec, overrides = TINY[task]
  config = config_util.load_config(spec, overrides + [f"compute_dtype={dtype}"])
  step, _, abstract_in, pieces = paper_configs.build_step(config, jax.devices()[:1], batch_size=2)
  batch = paper_configs.random_batch(abstract_in, seed=3)
  with jax.set_mesh(pieces["mesh"]):
    state = jax.jit(pieces["init_fn"], out_shardings=pieces["state_sh"])(jax.random.key(0))
    batch = {k: jax.device_put(v, pieces["batch_sh"][k]) for k, v in batch.items()}
    state, metrics = step(state, batch)
  return state, jax.device_get(metrics)


@pytest.mark.parametrize(
  "task",
  # video_relations and occlusion compile their steps twice at several times commonsense's cost
  # (occlusion 25 s on 2 cores); commonsense keeps the bf16 path in the fast tier.
  [pytest.param(t, marks=pytest.mark.slow) if t != "commonsense" else t for t in sorted(TINY)],
)
def test_bf16_step_matches_f32(task):
  state32, m32 = _one_step(task, "float32")
  state16, m16 = _one_step(task, "bfloat16")
  # Parameters and optimizer state stay float32 under bf16 compute.
  for leaf in jax.tree.leaves((state16["params"], state16["opt"])):
    if jnp.issubdtype(leaf.dtype, jnp.floating):
      assert leaf.dtype == jnp.float32
  l32, l16 = float(m32["loss"]), float(m16["loss"])
  assert np.isfinite(l16)
  assert abs(l16 - l32) <= LOSS_RTOL * abs(l32), (l16, l32)
  assert l16 != l32  # the bf16 path really ran in bf16


def test_compute_dtype_resolution():
  assert precision.resolve_dtype("auto", "cpu") == jnp.float32
  assert precision.resolve_dtype("auto", "gpu") == jnp.bfloat16
  assert precision.resolve_dtype("auto", "tpu") == jnp.bfloat16
  assert precision.resolve_dtype("float32", "tpu") == jnp.float32
  with pytest.raises(ValueError, match="compute_dtype"):
    precision.resolve_dtype("fp8")
  with pytest.raises(ValueError, match="'compute_dtype'"):
    config_util.load_config("configs/occlusion.py:tiny", ["compute_dtype=half"])
  for spec in ("configs/occlusion.py:tiny", "configs/video_relations.py:tiny"):
    config = config_util.load_config(spec)
    assert config.compute_dtype == "auto" and config.remat is False


def _vit_loss_grad(remat):
  kw = dict(width=32, depth=4, mlp_dim=128, num_heads=2, patch_size=4)
  model = vit.Model(**kw, remat=remat)
  images = jax.random.normal(jax.random.key(1), (4, 32, 32, 3))
  params = vit.Model(**kw).init(jax.random.key(0), images)["params"]

  def loss(p):
    pooled, out = model.apply({"params": p}, images, train=True)
    return jnp.mean(pooled**2) + jnp.mean(out["encoded"] ** 2)

  # What the forward pass keeps for the backward pass: the residuals in the compiled vjp's
  # outputs (XLA:CPU's peak temp of the fused value-and-grad step hides the difference).
  kept = jax.jit(lambda p: jax.vjp(loss, p)).lower(params).compile()
  return jax.jit(jax.value_and_grad(loss))(params), kept.memory_analysis().output_size_in_bytes


def test_vit_remat_saves_memory_same_gradients():
  (l0, g0), kept0 = _vit_loss_grad(False)
  (l1, g1), kept1 = _vit_loss_grad(True)
  # Without remat every block's attention maps and MLP activations are kept (6.2 MB here); with
  # it only the blocks' inputs (0.5 MB).
  assert kept1 * 4 < kept0, (kept1, kept0)
  assert abs(float(l1) - float(l0)) <= 1e-6 * abs(float(l0))
  for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g0)):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
