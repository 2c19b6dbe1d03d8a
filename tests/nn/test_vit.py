"""Shared ViT: shapes, resolution change, and loading a big_vision-format .npz."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.nn import vit


def _init(model, hw):
  x = jax.random.normal(jax.random.key(1), (2, *hw, 3))
  return x, model.init(jax.random.key(0), x)["params"]


def test_outputs_and_grid_shapes():
  m = vit.Model(variant="mu/8", posemb_grid=(4, 4))
  x, p = _init(m, (32, 48))
  pooled, out = m.apply({"params": p}, x)
  assert pooled.shape == (2, 32)
  assert out["encoded"].shape == (2, 24, 32)
  assert out["patch_grid"].shape == (2, 4, 6, 32)
  np.testing.assert_allclose(out["patch_grid"].reshape(2, 24, 32), out["encoded"])
  np.testing.assert_allclose(pooled, out["encoded"].mean(1), rtol=1e-6)
  with pytest.raises(ValueError, match="not a multiple of the patch size"):
    m.apply({"params": p}, jnp.zeros((1, 30, 32, 3)))


def test_decode_variant():
  assert vit.decode_variant("B/16") == dict(
    width=768, depth=12, mlp_dim=3072, num_heads=12, patch_size=16
  )
  with pytest.raises(ValueError, match="Unknown ViT variant 'X/16'"):
    vit.decode_variant("X/16")


def _write_bv_npz(path, params, *, tokens_layout=True, extra=None):
  """Writes params the way big_vision does: flat '/'-keys, pos_embedding as [1, N, D]."""
  flat = {f"params/img/{k}": np.asarray(v) for k, v in vit.flatten_params(params).items()}
  pe = flat["params/img/pos_embedding"]
  if tokens_layout:
    flat["params/img/pos_embedding"] = pe.reshape(1, -1, pe.shape[-1])
  flat["params/img/head/kernel"] = np.ones((pe.shape[-1], 10), np.float32)
  flat.update(extra or {})
  np.savez(path, **flat)


def test_load_big_vision_npz_roundtrip(tmp_path):
  m = vit.Model(variant="mu/8", posemb_grid=(4, 4), pool_type="tok")
  x, src = _init(m, (32, 32))
  _, fresh = _init(vit.Model(variant="mu/8", posemb_grid=(4, 4), pool_type="tok"), (32, 32))
  fresh = jax.tree.map(lambda a: a + 1.0, fresh)  # make sure every leaf really changes
  path = str(tmp_path / "bv.npz")
  _write_bv_npz(path, src)
  loaded = vit.load(fresh, path)
  for (k, a), (_, b) in zip(
    jax.tree_util.tree_leaves_with_path(src), jax.tree_util.tree_leaves_with_path(loaded)
  ):
    np.testing.assert_array_equal(a, b, err_msg=str(k))
  np.testing.assert_allclose(m.apply({"params": loaded}, x)[0], m.apply({"params": src}, x)[0])


def test_load_resamples_position_embedding(tmp_path):
  small = vit.Model(variant="mu/8", posemb_grid=(2, 2))
  _, src = _init(small, (16, 16))
  big = vit.Model(variant="mu/8", posemb_grid=(4, 4))
  _, target = _init(big, (32, 32))
  path = str(tmp_path / "bv.npz")
  _write_bv_npz(path, src)
  loaded = vit.load(target, path)
  assert loaded["pos_embedding"].shape == (1, 4, 4, 32)
  expected = jax.image.resize(src["pos_embedding"], (1, 4, 4, 32), "bilinear")
  np.testing.assert_allclose(loaded["pos_embedding"], expected, rtol=1e-6)


def test_load_errors_name_the_key(tmp_path):
  m = vit.Model(variant="mu/8", posemb_grid=(2, 2))
  _, p = _init(m, (16, 16))
  path = str(tmp_path / "bad.npz")
  bad = {"params/img/embedding/kernel": np.zeros((8, 8, 3, 7), np.float32)}
  _write_bv_npz(path, p, extra=bad)
  with pytest.raises(ValueError, match="'embedding/kernel' has shape"):
    vit.load(p, path)
  flat = {k: v for k, v in vit.flatten_params(p).items() if "encoderblock_1" not in k}
  path2 = str(tmp_path / "partial.npz")
  np.savez(path2, **{k: np.asarray(v) for k, v in flat.items()})
  with pytest.raises(ValueError, match="lacks .* parameters"):
    vit.load(p, path2)
