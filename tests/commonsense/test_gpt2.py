"""GPT-2 decoder: cache equivalence, masking, logical names, variants."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from relations.commonsense import gpt2
from tests.commonsense.random_params import random_params


# Model calls are jitted: op-by-op (eager) dispatch of a whole transformer
# costs seconds per call on CPU, a compiled call milliseconds.
LM = gpt2.GPT2(vocab_size=97, num_layers=2, width=32, num_heads=4, max_len=64, dropout=0.0)
TOKS = jnp.asarray(np.random.default_rng(0).integers(0, 97, (2, 12)))
PARAMS = random_params(LM, TOKS)


def _tiny():
  return LM, PARAMS, TOKS


@jax.jit
def _apply(params, toks, key_mask=None, kv_cache=None, cache_index=0):
  return LM.apply(
    {"params": params}, toks, key_mask=key_mask, kv_cache=kv_cache, cache_index=cache_index
  )


def test_cached_prefill_and_steps_equal_full_forward():
  _, params, toks = _tiny()
  full, _ = _apply(params, toks)
  cache = gpt2.init_cache(LM, batch=2, max_len=20)
  l1, out = _apply(params, toks[:, :7], kv_cache=cache, cache_index=0)
  np.testing.assert_allclose(l1, full[:, :7], atol=1e-5)
  kv = out["kv_cache"]
  for i in range(7, 12):
    li, out = _apply(params, toks[:, i : i + 1], kv_cache=kv, cache_index=i)
    kv = out["kv_cache"]
    np.testing.assert_allclose(li[:, 0], full[:, i], atol=1e-5)
  # The cache holds exactly the 12 written positions; the rest stays zero.
  k0 = np.asarray(kv[0]["k"])
  assert np.abs(k0[:, :12]).min(axis=(0, 2, 3)).max() > 0
  assert not k0[:, 12:].any()


def test_key_mask_hides_padding_keys():
  _, params, toks = _tiny()
  mask = jnp.asarray(np.arange(12) < 3) | jnp.asarray(np.arange(12) >= 6)
  mask = jnp.broadcast_to(mask, (2, 12))
  a, _ = _apply(params, toks, key_mask=mask)
  changed = toks.at[:, 3:6].set(5)
  b, _ = _apply(params, changed, key_mask=mask)
  # Masked positions' tokens cannot influence later (valid) positions ...
  np.testing.assert_allclose(a[:, 6:], b[:, 6:], atol=1e-5)
  # ... whereas without the mask (the faithful behaviour) they do.
  c, _ = _apply(params, toks)
  d, _ = _apply(params, changed)
  assert np.abs(np.asarray(c[:, 6:] - d[:, 6:])).max() > 1e-3


def test_embeds_path_equals_token_path():
  _, params, toks = _tiny()
  a, b = jax.jit(
    lambda p, t: (  # pylint: disable=g-long-lambda
      LM.apply({"params": p}, t)[0],
      LM.apply({"params": p}, embeds=LM.apply({"params": p}, t, method=gpt2.GPT2.embed))[0],
    )
  )(params, toks)
  np.testing.assert_allclose(a, b, atol=1e-6)


def test_params_carry_logical_axis_names():
  params = jax.eval_shape(LM.init, jax.random.PRNGKey(0), TOKS)["params"]
  specs = nn.get_partition_spec(params)
  assert tuple(specs["wte"]["embedding"]) == ("vocab", "embed")
  assert tuple(specs["h_0"]["attn"]["query"]["kernel"]) == ("embed", "heads", "kv")
  assert tuple(specs["h_1"]["attn"]["out"]["kernel"]) == ("heads", "kv", "embed")
  assert tuple(specs["h_1"]["mlp"]["c_fc"]["kernel"]) == ("embed", "mlp")
  assert tuple(specs["ln_f"]["scale"]) == ("embed",)


def test_remat_gives_same_gradients():
  lm, params, toks = _tiny()
  lm_r = lm.clone(remat=True)

  def loss(model):
    return lambda p: model.apply({"params": p}, toks)[0].std()

  @jax.jit
  def grads(p):
    return jax.grad(loss(lm))(p), jax.grad(loss(lm_r))(p)

  g1, g2 = grads(params)
  for a, b in zip(jax.tree.leaves(g1), jax.tree.leaves(g2)):
    np.testing.assert_allclose(a, b, atol=1e-6)
  assert max(float(jnp.abs(g).max()) for g in jax.tree.leaves(g1)) > 1e-4


@pytest.mark.parametrize(
  "variant,expected",
  [("small", (12, 768, 12)), ("medium", (24, 1024, 16)), ("large", (36, 1280, 20))],
)
def test_variants_have_gpt2_sizes(variant, expected):
  lm = gpt2.Model(variant=variant)
  assert (lm.num_layers, lm.width, lm.num_heads) == expected
  shapes = jax.eval_shape(lm.init, jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))["params"]
  n = sum(np.prod(x.shape) for x in jax.tree.leaves(nn.meta.unbox(shapes)))
  # 124M / 355M / 774M at the 50,257 vocabulary, + 60 rows for our tokens.
  want = {"small": 124439808, "medium": 354823168, "large": 774030080}[variant]
  assert n == want + 60 * expected[1]


def test_unknown_variant_is_an_error():
  with pytest.raises(ValueError, match="Unknown GPT-2 variant 'huge'"):
    gpt2.Model(variant="huge")
