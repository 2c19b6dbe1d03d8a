"""Token sampling: temperature, top-k and nucleus (top-p), pure and jittable.

Nucleus semantics follow the official `top_k_top_p_filtering`:
sort descending, keep the tokens whose cumulative probability *before* them is
< p (so the first token and the one that crosses p are always kept),
renormalise, sample. Sampling happens in sorted order and the index is mapped
back, so ties at the threshold are treated exactly as the sorted reference.
`top_k = 0` and `top_p >= 1` disable the respective filters.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

NEG_INF = -1e30


def nucleus_keep(sorted_logits: jax.Array, top_p: float) -> jax.Array:
  """bool [..., V]: which entries of descending-sorted logits the nucleus keeps."""
  probs = jax.nn.softmax(sorted_logits, axis=-1)
  before = jnp.cumsum(probs, axis=-1) - probs  # exclusive cumulative sum
  return before < top_p


def sample(rng: jax.Array, logits: jax.Array, *, temperature: float = 1.0,
           top_k: int = 0, top_p: float = 1.0) -> jax.Array:
  """Draws one token per row.

  Args:
    rng: PRNG key.
    logits: float [N, V] next-token logits.
    temperature: > 0; 0 means greedy (argmax).
    top_k: keep the k most likely tokens (0 = all).
    top_p: nucleus mass (>= 1 = all).

  Returns:
    int32 [N] token ids.
  """
  logits = logits.astype(jnp.float32)
  if temperature == 0:
    return jnp.argmax(logits, -1).astype(jnp.int32)
  logits = logits / temperature
  v = logits.shape[-1]
  if top_k == 0 and top_p >= 1.0:
    return jax.random.categorical(rng, logits, axis=-1).astype(jnp.int32)
  if 0 < top_k < v and top_p >= 1.0:
    # top_k alone needs no full sort.
    vals, idx = jax.lax.top_k(logits, top_k)
    choice = jax.random.categorical(rng, vals, axis=-1)
    return jnp.take_along_axis(idx, choice[:, None], -1)[:, 0].astype(jnp.int32)
  iota = jnp.broadcast_to(jnp.arange(v, dtype=jnp.int32), logits.shape)
  neg_sorted, order = jax.lax.sort((-logits, iota), dimension=-1, num_keys=1)
  sorted_logits = -neg_sorted
  keep = jnp.ones(sorted_logits.shape, bool)
  if 0 < top_k < v:
    keep &= jnp.arange(v) < top_k
    sorted_logits = jnp.where(keep, sorted_logits, NEG_INF)
  if top_p < 1.0:
    keep &= nucleus_keep(sorted_logits, top_p)
  choice = jax.random.categorical(
      rng, jnp.where(keep, sorted_logits, NEG_INF), axis=-1)
  return jnp.take_along_axis(order, choice[:, None], -1)[:, 0].astype(jnp.int32)
