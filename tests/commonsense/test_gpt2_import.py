"""Our GPT-2 vs PyTorch `transformers` on the same random small GPT-2 file.

The checkpoint is GPT-2 in every respect but depth and width (2 layers of 64,
4 heads, a non-default MLP width): the real 50,257-token vocabulary (so the
resize to 50,317 is the real one), 1,024 positions, every parameter kind of
every block, the tied head. A GPT-2-small-sized file checks no mapping that
this one does not, at ~40x the CPU time.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import save_file

from relations.commonsense import gpt2
from relations.commonsense import gpt2_import

torch = pytest.importorskip("torch")  # test extra; present in the venv
transformers = pytest.importorskip("transformers")


WIDTH = 64


@pytest.fixture(scope="module")
def hf_small(tmp_path_factory):
  """A small HF GPT-2 with every weight randomised, saved to disk."""
  torch.manual_seed(0)
  cfg = transformers.GPT2Config(
    n_layer=2, n_embd=WIDTH, n_head=4, n_inner=3 * WIDTH, vocab_size=50257, n_positions=1024
  )
  model = transformers.GPT2LMHeadModel(cfg).eval()
  # HF's init leaves LayerNorms at 1/0 and biases at 0; randomise everything
  # so a swapped scale/bias or a missing bias cannot go unnoticed.
  with torch.no_grad():
    for name, p in model.named_parameters():
      if (
        name.endswith("ln_1.weight")
        or name.endswith("ln_2.weight")
        or (name.endswith("ln_f.weight"))
      ):
        p.copy_(1.0 + 0.1 * torch.randn_like(p))
      else:
        p.copy_(0.05 * torch.randn_like(p))
  d = tmp_path_factory.mktemp("gpt2_small")
  model.save_pretrained(str(d))
  return model, str(d)


def _ours(model_dir, vocab_size):
  cfg = gpt2_import.read_hf_config(model_dir)
  assert cfg == dict(
    num_layers=2, width=WIDTH, num_heads=4, max_len=1024, ln_eps=1e-5, mlp_dim=3 * WIDTH
  )
  lm = gpt2.GPT2(**cfg, vocab_size=vocab_size, dropout=0.0)
  shapes = jax.eval_shape(lm.init, jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))["params"]
  params = gpt2_import.load(shapes, os.path.join(model_dir, "model.safetensors"))
  return lm, params


def test_logits_equal_transformers(hf_small):
  model, d = hf_small
  toks = np.random.default_rng(1).integers(0, 50257, (2, 24))
  with torch.no_grad():
    ref = model(torch.tensor(toks)).logits.numpy()
  lm, params = _ours(d, 50257)
  ours, _ = jax.jit(lm.apply)({"params": params}, jnp.asarray(toks))
  assert ours.shape == ref.shape == (2, 24, 50257)
  np.testing.assert_allclose(np.asarray(ours), ref, atol=1e-5, rtol=1e-5)
  assert np.array_equal(np.asarray(ours).argmax(-1), ref.argmax(-1))


def test_key_mask_equals_transformers_attention_mask(hf_small):
  model, d = hf_small
  toks = np.random.default_rng(2).integers(0, 50257, (2, 16))
  mask = np.ones((2, 16), np.int64)
  mask[0, 5:9] = 0  # padding in the middle, as between the layout's segments
  mask[1, 12:] = 0
  with torch.no_grad():
    ref = model(torch.tensor(toks), attention_mask=torch.tensor(mask)).logits
  lm, params = _ours(d, 50257)
  ours, _ = jax.jit(lm.apply)(
    {"params": params}, jnp.asarray(toks), key_mask=jnp.asarray(mask, bool)
  )
  # Rows of padded queries are irrelevant (HF and we differ by design there).
  valid = mask.astype(bool)
  np.testing.assert_allclose(np.asarray(ours)[valid], ref.numpy()[valid], atol=1e-5, rtol=1e-5)


def test_resized_vocab_keeps_old_rows_and_adds_seeded_rows(hf_small):
  model, d = hf_small
  lm, params = _ours(d, gpt2.VISUALCOMET_VOCAB)
  wte = np.asarray(params["wte"]["embedding"].value)
  hf_wte = model.transformer.wte.weight.detach().numpy()
  assert wte.shape == (50317, WIDTH)
  np.testing.assert_array_equal(wte[:50257], hf_wte)
  # The 60 added rows: N(0, 0.02) from numpy's generator seeded with 0.
  extra = wte[50257:]
  np.testing.assert_array_equal(
    extra, np.random.default_rng(0).normal(0.0, 0.02, (60, WIDTH)).astype(np.float32)
  )
  assert abs(extra.std() - 0.02) < 0.001 and abs(extra.mean()) < 0.001
  _, again = _ours(d, gpt2.VISUALCOMET_VOCAB)
  np.testing.assert_array_equal(np.asarray(again["wte"]["embedding"].value), wte)
  toks = np.random.default_rng(3).integers(0, 50257, (1, 8))
  with torch.no_grad():
    ref = model(torch.tensor(toks)).logits.numpy()
  ours, _ = jax.jit(lm.apply)({"params": params}, jnp.asarray(toks))
  np.testing.assert_allclose(np.asarray(ours)[..., :50257], ref, atol=1e-5, rtol=1e-5)


def _tiny_file(tmp_path, drop=None, untie=False):
  rng = np.random.default_rng(0)
  d, v = 8, 11
  t = {
    "wte.weight": rng.normal(size=(v, d)),
    "wpe.weight": rng.normal(size=(16, d)),
    "ln_f.weight": np.ones(d),
    "ln_f.bias": np.zeros(d),
  }
  p = "h.0."
  t.update(
    {
      p + "ln_1.weight": np.ones(d),
      p + "ln_1.bias": np.zeros(d),
      p + "ln_2.weight": np.ones(d),
      p + "ln_2.bias": np.zeros(d),
      p + "attn.c_attn.weight": rng.normal(size=(d, 3 * d)),
      p + "attn.c_attn.bias": np.zeros(3 * d),
      p + "attn.c_proj.weight": rng.normal(size=(d, d)),
      p + "attn.c_proj.bias": np.zeros(d),
      p + "mlp.c_fc.weight": rng.normal(size=(d, 4 * d)),
      p + "mlp.c_fc.bias": np.zeros(4 * d),
      p + "mlp.c_proj.weight": rng.normal(size=(4 * d, d)),
      p + "mlp.c_proj.bias": np.zeros(d),
    }
  )
  if untie:
    t["lm_head.weight"] = t["wte.weight"] + 1
  if drop:
    del t[drop]
  path = str(tmp_path / "model.safetensors")
  save_file({k: np.asarray(x, np.float32) for k, x in t.items()}, path)
  with open(tmp_path / "config.json", "w") as f:
    json.dump({"n_layer": 1, "n_embd": d, "n_head": 2, "n_positions": 16}, f)
  lm = gpt2.GPT2(vocab_size=v, num_layers=1, width=d, num_heads=2, max_len=16)
  shapes = jax.eval_shape(lm.init, jax.random.PRNGKey(0), jnp.zeros((1, 2), jnp.int32))["params"]
  return path, shapes


def test_missing_tensor_names_file_and_key(tmp_path):
  path, shapes = _tiny_file(tmp_path, drop="h.0.mlp.c_fc.bias")
  with pytest.raises(KeyError, match=r"model\.safetensors.*h\.0\.mlp\.c_fc\.bias"):
    gpt2_import.load(shapes, path)


def test_untied_head_is_rejected(tmp_path):
  path, shapes = _tiny_file(tmp_path, untie=True)
  with pytest.raises(ValueError, match="lm_head.weight differs"):
    gpt2_import.load(shapes, path)


def test_smaller_model_vocab_is_rejected(tmp_path):
  path, _ = _tiny_file(tmp_path)
  lm = gpt2.GPT2(vocab_size=5, num_layers=1, width=8, num_heads=2, max_len=16)
  shapes = jax.eval_shape(lm.init, jax.random.PRNGKey(0), jnp.zeros((1, 2), jnp.int32))["params"]
  with pytest.raises(ValueError, match="file vocabulary 11 is larger"):
    gpt2_import.load(shapes, path)
