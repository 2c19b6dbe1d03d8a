"""Pretrained ViT import: Hugging Face ViT / DINOv2 / CLIP vision equal transformers' features,
big_vision (and AugReg) .npz files load into the paper configs' models, errors name tensors."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from relations.nn import vit
from relations.nn import vit_import
from relations.train import config_util

_SMALL = dict(
  hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_channels=3
)


def _hf_model(family, image_size, patch):
  torch.manual_seed(0)
  if family == "vit":
    m = transformers.ViTModel(
      transformers.ViTConfig(**_SMALL, image_size=image_size, patch_size=patch)
    )
  elif family == "dinov2":
    kw = {k: v for k, v in _SMALL.items() if k != "intermediate_size"}
    m = transformers.Dinov2Model(
      transformers.Dinov2Config(**kw, mlp_ratio=2, image_size=image_size, patch_size=patch)
    )
  else:
    m = transformers.CLIPVisionModel(
      transformers.CLIPVisionConfig(**_SMALL, image_size=image_size, patch_size=patch)
    )
  # Random values everywhere (LayerNorm scales, layer scales, biases included), so that a
  # tensor mapped to the wrong place cannot go unnoticed.
  with torch.no_grad():
    for p in m.parameters():
      p.add_(0.2 * torch.randn_like(p))
  return m.eval()


_NORM = {
  "vit": ((0.5,) * 3, (0.5,) * 3),
  "dinov2": vit_import._NORM["dinov2"],  # pylint: disable=protected-access
  "clip": vit_import._NORM["clip"],
}  # pylint: disable=protected-access
_UNUSED = {
  "vit": ["pooler.dense.bias", "pooler.dense.weight"],
  "dinov2": ["embeddings.mask_token"],
  "clip": [],
}


@pytest.mark.parametrize("family,patch", [("vit", 8), ("dinov2", 14), ("clip", 8)])
def test_hf_import_equals_transformers(tmp_path, family, patch):
  side = 4 * patch
  hf = _hf_model(family, side, patch)
  hf.save_pretrained(str(tmp_path))
  kw = vit_import.hf_vit_kwargs(str(tmp_path))
  model = vit.Model(**kw, posemb_grid=(4, 4))
  x = np.random.default_rng(0).uniform(-1, 1, (2, side, side, 3)).astype(np.float32)
  init = model.init(jax.random.key(0), x)["params"]
  params, report = vit_import.load(init, str(tmp_path))
  assert report.unfilled == [] and report.unused == _UNUSED[family], report.summary()
  pooled, out = model.apply({"params": params}, x)

  mean, std = (np.asarray(a, np.float32) for a in _NORM[family])
  pixels = torch.from_numpy((((x + 1) / 2 - mean) / std).transpose(0, 3, 1, 2).copy())
  with torch.no_grad():
    res = hf(pixel_values=pixels)
    lhs = res.last_hidden_state
    if family == "clip":
      # The un-normalised residual stream (|x| up to ~8 here) agrees to 1e-5 of its scale.
      np.testing.assert_allclose(
        out[f"block{kw['depth'] - 1}"], lhs.numpy(), rtol=0, atol=1e-5 * float(lhs.abs().max())
      )
      lhs = getattr(hf, "vision_model", hf).post_layernorm(lhs)
  lhs = lhs.numpy()
  assert out["encoded"].shape == (2, 16, 32)
  np.testing.assert_allclose(out["encoded"], lhs[:, 1:], atol=1e-5, rtol=0)
  np.testing.assert_allclose(pooled, lhs[:, 0], atol=1e-5, rtol=0)
  if family != "vit":  # ViT's pooler is a tanh head, not the CLS feature
    np.testing.assert_allclose(pooled, res.pooler_output.numpy(), atol=1e-5, rtol=0)


def test_hf_import_resamples_posemb_and_checks_shapes(tmp_path):
  hf = _hf_model("dinov2", 56, 14)
  hf.save_pretrained(str(tmp_path))
  kw = vit_import.hf_vit_kwargs(str(tmp_path))
  big = vit.Model(**kw, posemb_grid=(6, 6))
  init = big.init(jax.random.key(0), jnp.zeros((1, 84, 84, 3)))["params"]
  params, _ = vit_import.load(init, str(tmp_path))
  pos = hf.embeddings.position_embeddings.detach().numpy()[:, 1:].reshape(1, 4, 4, 32)
  np.testing.assert_allclose(
    params["pos_embedding"], jax.image.resize(pos, (1, 6, 6, 32), "bilinear"), rtol=1e-6
  )
  wide = vit.Model(**{**kw, "width": 48, "num_heads": 2}, posemb_grid=(4, 4))
  init = wide.init(jax.random.key(0), jnp.zeros((1, 56, 56, 3)))["params"]
  with pytest.raises(
    ValueError,
    match=r"tensor 'layernorm.weight' has shape \(32,\), the model's "
    r"'Transformer/encoder_norm/scale' is \(48,\)",
  ):
    vit_import.load(init, str(tmp_path))
  with pytest.raises(ValueError, match=r"set model.vit.mlp_act='gelu' \(config has 'gelu_tanh'\)"):
    vit_import.check_architecture({**kw, "mlp_act": "gelu_tanh"}, str(tmp_path))


@pytest.mark.slow  # ~9 s of building the B/16 paper model; the HF import test covers the module
def test_augreg_npz_loads_into_the_occlusion_paper_model(tmp_path):
  """An AugReg-layout ViT-B/16 .npz (CLS position, MultiHeadDotProductAttention_1, ...) at
  224 px fills every ViT parameter of configs/occlusion.py:B/16 (20 x 20 grid at 320 px)."""
  config = config_util.load_config("configs/occlusion.py:B/16")
  assert config.model.backbone == "augreg_b16"
  from relations.occlusion import task  # pylint: disable=g-import-not-at-top

  model = task.make_model(config)
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, 320, 320, 3))))
  params = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes["params"])
  ours = vit.flatten_params(params["vit"])
  rng = np.random.default_rng(0)
  ckpt = {}
  for k, v in ours.items():
    k = k.replace("MultiHeadDotProductAttention_0", "MultiHeadDotProductAttention_1")
    k = k.replace("/LayerNorm_1/", "/LayerNorm_2/").replace("/MlpBlock_0/", "/MlpBlock_3/")
    if k == "pos_embedding":
      k, v = "Transformer/posembed_input/pos_embedding", np.zeros((1, 197, 768), np.float32)
    ckpt[k] = (
      rng.standard_normal(v.shape, np.float32) if k != "cls" else np.ones(v.shape, np.float32)
    )
  ckpt["head/kernel"] = np.zeros((768, 1000), np.float32)
  path = str(tmp_path / "augreg.npz")
  np.savez(path, **ckpt)
  with config.unlocked():
    config.model.init_from = path
  loaded = task.load_pretrained(config, params)
  flat = vit.flatten_params(loaded["vit"])
  grid = ckpt["Transformer/posembed_input/pos_embedding"][:, 1:].reshape(1, 14, 14, 768)
  np.testing.assert_allclose(
    flat["pos_embedding"], jax.image.resize(grid, (1, 20, 20, 768), "bilinear"), atol=1e-6
  )
  np.testing.assert_array_equal(
    flat["cls"], 1 + ckpt["Transformer/posembed_input/pos_embedding"][:, :1]
  )
  k = "Transformer/encoderblock_11/MlpBlock_0/Dense_1/kernel"
  np.testing.assert_array_equal(flat[k], ckpt[k.replace("MlpBlock_0", "MlpBlock_3")])
  _, report = vit_import.load(params["vit"], path)
  assert report.unfilled == [] and report.unused == ["head/kernel"], report.summary()
  # The task head is left as it was.
  np.testing.assert_array_equal(loaded["proj"]["kernel"], params["proj"]["kernel"])


def test_paper_config_without_init_from_warns_tiny_is_silent(caplog):
  from relations.occlusion import task  # pylint: disable=g-import-not-at-top
  import logging  # pylint: disable=g-import-not-at-top

  params = {"vit": {}}
  with caplog.at_level(logging.WARNING):
    assert (
      task.load_pretrained(config_util.load_config("configs/occlusion.py:tiny"), params) is params
    )
  assert "RANDOM" not in caplog.text
  with caplog.at_level(logging.WARNING):
    for spec in ("configs/occlusion.py:B/16", "configs/video_relations.py:paper"):
      cfg = config_util.load_config(spec)
      assert trainer_task(cfg).load_pretrained(cfg, params) is params
  assert caplog.text.count("starts from RANDOM weights") == 2
  assert "B_16-i21k-300ep" in caplog.text


def trainer_task(cfg):
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  return trainer.import_by_name("task", cfg.task)
