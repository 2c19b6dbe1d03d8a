"""GPT-2 decoder in Flax linen (pre-LN, learned positions, tied embeddings).

Usage:
  lm = gpt2.Model(variant="small", vocab_size=50317)
  params = lm.init(rng, tokens)["params"]
  logits, out = lm.apply({"params": params}, tokens)          # [B, L, V]

  # Cached decoding: allocate a cache, prefill, then one token at a time.
  cache = gpt2.init_cache(lm, batch=B, max_len=T)
  logits, out = lm.apply({"params": params}, prompt, kv_cache=cache,
                         cache_index=0)                        # writes 0..P-1
  logits, out = lm.apply({"params": params}, next_tok, kv_cache=out["kv_cache"],
                         cache_index=P)

Parameter names follow Hugging Face's GPT-2 closely (`wte`, `wpe`, `h_<i>/ln_1`,
`attn/{query,key,value,out}`, `mlp/{c_fc,c_proj}`, `ln_f`) so that
`gpt2_import.py` is a readable one-to-one mapping. Parameters carry logical axis
names (`vocab`, `embed`, `heads`, `kv`, `mlp`, `pos`) via
`nn.with_logical_partitioning`; activations are constrained with `act_batch`,
`act_len`, `act_emb`, `act_heads`, `act_mlp`, `act_vocab`.

Numerics match `transformers.GPT2LMHeadModel` (gelu tanh approximation,
LayerNorm eps 1e-5, attention scaled by 1/sqrt(head_dim), softmax in float32).

Attention masking: the causal mask always applies. `key_mask` [B, K] (True =
may be attended) optionally hides padding keys; the original VisualCOMET code has
no such mask, so it is optional. With a KV cache, K is the cache
length and `key_mask` covers every cache slot (the caller keeps it across steps).
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

# (num_layers, width, num_heads) by size name. small/medium/large are OpenAI's
# GPT-2 124M / 355M / 774M; tiny is for CPU tests and the demo.
SIZES = {
  "tiny": (2, 64, 4),
  "small": (12, 768, 12),
  "medium": (24, 1024, 16),
  "large": (36, 1280, 20),
  "xl": (48, 1600, 25),
}

GPT2_VOCAB = 50257
# 50257 + 10 structural tokens + <|det0|>..<|det49|>.
VISUALCOMET_VOCAB = 50317

KVCache = tuple  # tuple over layers of {"k": [B, T, H, Dh], "v": [B, T, H, Dh]}


def decode_variant(variant: str | None) -> dict[str, Any]:
  """'small' -> dict(num_layers=12, width=768, num_heads=12)."""
  if variant is None:
    return {}
  if variant not in SIZES:
    raise ValueError(f"Unknown GPT-2 variant {variant!r}; expected one of {sorted(SIZES)}")
  layers, width, heads = SIZES[variant]
  return dict(num_layers=layers, width=width, num_heads=heads)


def _init(stddev, names):
  return nn.with_logical_partitioning(nn.initializers.normal(stddev), names)


def _zeros(names):
  return nn.with_logical_partitioning(nn.initializers.zeros_init(), names)


def _ones(names):
  return nn.with_logical_partitioning(nn.initializers.ones_init(), names)


class LayerNorm(nn.Module):
  """LayerNorm with logically named scale/bias (HF: `weight`/`bias`)."""

  eps: float = 1e-5

  @nn.compact
  def __call__(self, x):
    d = x.shape[-1]
    scale = self.param("scale", _ones(("embed",)), (d,), jnp.float32)
    bias = self.param("bias", _zeros(("embed",)), (d,), jnp.float32)
    xf = x.astype(jnp.float32)
    mean = xf.mean(-1, keepdims=True)
    var = jnp.square(xf - mean).mean(-1, keepdims=True)
    y = (xf - mean) * jax.lax.rsqrt(var + self.eps) * scale + bias
    return y.astype(x.dtype)


class Attention(nn.Module):
  """Causal multi-head self-attention with an optional KV cache."""

  num_heads: int
  init_std: float = 0.02
  out_std: float = 0.02
  dropout: float = 0.1
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, *, key_mask, kv, cache_index, train, prefix=None, prefix_mask=None):
    b, s, d = x.shape
    h = self.num_heads
    dh = d // h
    proj = lambda name: nn.DenseGeneral(  # pylint: disable=g-long-lambda
      (h, dh),
      dtype=self.dtype,
      name=name,
      kernel_init=_init(self.init_std, ("embed", "heads", "kv")),
      bias_init=_zeros(("heads", "kv")),
    )
    q, k, v = proj("query")(x), proj("key")(x), proj("value")(x)
    q = nn.with_logical_constraint(q, ("act_batch", "act_len", "act_heads", None))
    if kv is not None:
      # Write this chunk at [cache_index, cache_index + s) of the fixed-size
      # cache; all rows of the batch share the index (fixed-width prompts).
      zero = jnp.zeros((), jnp.int32)
      start = (zero, jnp.asarray(cache_index, jnp.int32), zero, zero)
      k = jax.lax.dynamic_update_slice(kv["k"], k.astype(kv["k"].dtype), start)
      v = jax.lax.dynamic_update_slice(kv["v"], v.astype(kv["v"].dtype), start)
      kv = {"k": k, "v": v}
      q_pos = cache_index + jnp.arange(s)
    else:
      q_pos = jnp.arange(s)
    k_pos = jnp.arange(k.shape[1])
    allowed = (k_pos[None, :] <= q_pos[:, None])[None, None]  # [1, 1, S, K]
    if key_mask is not None:
      allowed = allowed & key_mask[:, None, None, :].astype(bool)
    scale = jnp.sqrt(jnp.float32(dh))
    logits = jnp.einsum("bqhd,bkhd->bhqk", q, k.astype(q.dtype))
    logits = logits.astype(jnp.float32) / scale
    logits = jnp.where(allowed, logits, jnp.finfo(jnp.float32).min)
    if prefix is None:
      probs = jax.nn.softmax(logits, axis=-1).astype(self.dtype)
      probs = nn.Dropout(self.dropout)(probs, deterministic=not train)
      y = jnp.einsum("bhqk,bkhd->bqhd", probs, v.astype(self.dtype))
    else:
      # Shared prefix: rows [G * R] continue G prefixes (R rows each, in
      # order), whose keys/values [G, P, H, Dh] are read in place, never
      # copied per row. One softmax over [prefix keys | own keys].
      g, p = prefix["k"].shape[0], prefix["k"].shape[1]
      r = b // g
      qg = q.reshape(g, r, s, h, dh)
      pl = jnp.einsum("grqhd,gkhd->grhqk", qg, prefix["k"].astype(q.dtype))
      pl = pl.astype(jnp.float32).reshape(b, h, s, p) / scale
      if prefix_mask is not None:
        pm = jnp.repeat(prefix_mask.astype(bool), r, axis=0)
        pl = jnp.where(pm[:, None, None, :], pl, jnp.finfo(jnp.float32).min)
      probs = jax.nn.softmax(jnp.concatenate([pl, logits], -1), axis=-1)
      probs = nn.Dropout(self.dropout)(probs.astype(self.dtype), deterministic=not train)
      pp = probs[..., :p].reshape(g, r, h, s, p)
      y = jnp.einsum("grhqk,gkhd->grqhd", pp, prefix["v"].astype(self.dtype))
      y = y.reshape(b, s, h, dh) + jnp.einsum(
        "bhqk,bkhd->bqhd", probs[..., p:], v.astype(self.dtype)
      )
    y = nn.DenseGeneral(
      d,
      axis=(-2, -1),
      dtype=self.dtype,
      name="out",
      kernel_init=_init(self.out_std, ("heads", "kv", "embed")),
      bias_init=_zeros(("embed",)),
    )(y)
    return y, kv


class Mlp(nn.Module):
  """GPT-2 MLP: Dense(4D) -> gelu(tanh) -> Dense(D)."""

  mlp_dim: int
  init_std: float = 0.02
  out_std: float = 0.02
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x):
    d = x.shape[-1]
    y = nn.Dense(
      self.mlp_dim,
      dtype=self.dtype,
      name="c_fc",
      kernel_init=_init(self.init_std, ("embed", "mlp")),
      bias_init=_zeros(("mlp",)),
    )(x)
    y = nn.with_logical_constraint(y, ("act_batch", "act_len", "act_mlp"))
    y = jax.nn.gelu(y, approximate=True)
    return nn.Dense(
      d,
      dtype=self.dtype,
      name="c_proj",
      kernel_init=_init(self.out_std, ("mlp", "embed")),
      bias_init=_zeros(("embed",)),
    )(y)


class Block(nn.Module):
  """Pre-LN block: x + Attn(LN(x)); x + MLP(LN(x))."""

  num_heads: int
  mlp_dim: int
  num_layers: int
  dropout: float = 0.1
  ln_eps: float = 1e-5
  dtype: Any = jnp.float32

  @nn.compact
  def __call__(self, x, key_mask, kv, cache_index, train, prefix=None, prefix_mask=None):
    # HF's GPT-2 init scales residual output projections by 1/sqrt(2 * layers).
    out_std = 0.02 / (2 * self.num_layers) ** 0.5
    x = nn.with_logical_constraint(x, ("act_batch", "act_len", "act_emb"))
    y, kv = Attention(
      self.num_heads, out_std=out_std, dropout=self.dropout, dtype=self.dtype, name="attn"
    )(
      LayerNorm(self.ln_eps, name="ln_1")(x),
      key_mask=key_mask,
      kv=kv,
      cache_index=cache_index,
      train=train,
      prefix=prefix,
      prefix_mask=prefix_mask,
    )
    x = x + nn.Dropout(self.dropout)(y, deterministic=not train)
    y = Mlp(self.mlp_dim, out_std=out_std, dtype=self.dtype, name="mlp")(
      LayerNorm(self.ln_eps, name="ln_2")(x)
    )
    x = x + nn.Dropout(self.dropout)(y, deterministic=not train)
    return x, kv


class GPT2(nn.Module):
  """See the module docstring.

  Attributes:
    vocab_size: rows of the tied token embedding.
    num_layers, width, num_heads: transformer sizes; mlp_dim defaults to 4x.
    max_len: number of learned positions (GPT-2: 1024).
    dropout: embedding / attention / residual dropout (GPT-2: 0.1 each).
    dtype: compute dtype of matmuls (params stay float32).
    remat: rematerialise each block in the backward pass.
  """

  vocab_size: int = VISUALCOMET_VOCAB
  num_layers: int = 12
  width: int = 768
  num_heads: int = 12
  mlp_dim: int | None = None
  max_len: int = 1024
  dropout: float = 0.1
  ln_eps: float = 1e-5
  dtype: Any = jnp.float32
  remat: bool = False

  def setup(self):
    self.wte = nn.Embed(
      self.vocab_size,
      self.width,
      dtype=self.dtype,
      embedding_init=_init(0.02, ("vocab", "embed")),
      name="wte",
    )
    # HF initialises positions with the same N(0, 0.02).
    self.wpe = nn.Embed(
      self.max_len,
      self.width,
      dtype=self.dtype,
      embedding_init=_init(0.02, ("pos", "embed")),
      name="wpe",
    )
    # Block args are (x, key_mask, kv, cache_index, train); `train` is static.
    block = nn.remat(Block, static_argnums=(5,)) if self.remat else Block
    self.blocks = [
      block(
        self.num_heads,
        self.mlp_dim or 4 * self.width,
        self.num_layers,
        self.dropout,
        self.ln_eps,
        self.dtype,
        name=f"h_{i}",
      )
      for i in range(self.num_layers)
    ]
    self.ln_f = LayerNorm(self.ln_eps, name="ln_f")
    self.drop = nn.Dropout(self.dropout)

  def embed(self, tokens: jax.Array) -> jax.Array:
    """Token embeddings [B, L, D] (no positions) for int tokens [B, L]."""
    return self.wte(tokens)

  def logits(self, hidden: jax.Array) -> jax.Array:
    """Tied LM head: hidden [..., D] -> logits [..., V] (float32)."""
    return self.wte.attend(hidden).astype(jnp.float32)

  def __call__(
    self,
    tokens: jax.Array | None = None,
    *,
    embeds: jax.Array | None = None,
    key_mask: jax.Array | None = None,
    kv_cache: KVCache | None = None,
    cache_index: jax.Array | int = 0,
    return_logits: bool = True,
    train: bool = False,
    prefix: KVCache | None = None,
    prefix_mask: jax.Array | None = None,
  ):
    """Runs the decoder.

    Args:
      tokens: int32 [B, S] token ids; or None when `embeds` is given.
      embeds: float [B, S, D] input embeddings replacing `wte(tokens)` (the
        visual model overwrites image slots this way). Positions are added here.
      key_mask: optional bool [B, K]: keys that may be attended (K = S without
        cache, the cache length with one). None = causal mask only.
      kv_cache: optional cache from `init_cache`; the chunk is written at
        `cache_index` and positions start there.
      cache_index: int32 scalar, first position of this chunk.
      return_logits: if False, skip the vocabulary projection (out["hidden"]
        still holds the final hidden states).
      train: enables dropout (needs a 'dropout' rng).
      prefix: optional shared prefix, per layer {"k", "v"} [G, P, H, Dh] (the
        `kv_cache` a prefill of G prompts of length P returns): the B rows
        continue these prompts, B / G consecutive rows per prompt, and attend
        to all its P keys without copying them. Positions then start at
        P + cache_index, and `kv_cache`/`key_mask` cover the rows' own tokens
        only.
      prefix_mask: optional bool [G, P], prefix keys that may be attended.

    Returns:
      (logits [B, S, V] float32 or None, out) with out["hidden"] [B, S, D] after
      ln_f and out["kv_cache"] the updated cache (None without one).
    """
    if embeds is None:
      embeds = self.wte(tokens)
    s = embeds.shape[1]
    offset = 0 if prefix is None else prefix[0]["k"].shape[1]
    positions = offset + jnp.asarray(cache_index, jnp.int32) + jnp.arange(s)
    x = embeds.astype(self.dtype) + self.wpe(positions)[None]
    x = self.drop(x, deterministic=not train)
    new_cache = []
    for i, blk in enumerate(self.blocks):
      kv = None if kv_cache is None else kv_cache[i]
      pre = None if prefix is None else prefix[i]
      x, kv = blk(x, key_mask, kv, cache_index, train, pre, prefix_mask)
      new_cache.append(kv)
    x = self.ln_f(x)
    out = {"hidden": x, "kv_cache": None if kv_cache is None else tuple(new_cache)}
    logits = None
    if return_logits:
      logits = nn.with_logical_constraint(self.logits(x), ("act_batch", "act_len", "act_vocab"))
    return logits, out


def init_cache(model: GPT2, batch: int, max_len: int, dtype: Any = jnp.float32) -> KVCache:
  """Zero KV cache: per layer {"k", "v"} of shape [batch, max_len, H, Dh]."""
  dh = model.width // model.num_heads
  shape = (batch, max_len, model.num_heads, dh)
  return tuple(
    {"k": jnp.zeros(shape, dtype), "v": jnp.zeros(shape, dtype)} for _ in range(model.num_layers)
  )


def Model(*, variant: str | None = None, **kw) -> GPT2:  # pylint: disable=invalid-name
  """Builds a GPT2 from a size name (`tiny`/`small`/`medium`/`large`/`xl`)."""
  return GPT2(**{**decode_variant(variant), **kw})
