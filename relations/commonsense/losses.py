"""Language-model losses of the generator: shifted next-token NLL, the training loss, Acc@50 scores."""

import jax
import jax.numpy as jnp

from relations.commonsense.text.sequence import IGNORE


def token_nll(logits: jax.Array, labels: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Shifted next-token NLL: position t predicts labels[t + 1].

  Args:
    logits: [B, L, V].
    labels: int [B, L], IGNORE (-1) where not labelled.

  Returns:
    (nll [B, L-1] float32, zero where ignored; valid [B, L-1] bool).
  """
  tgt = labels[:, 1:]
  valid = tgt != IGNORE
  logp = jax.nn.log_softmax(logits[:, :-1].astype(jnp.float32), -1)
  nll = -jnp.take_along_axis(logp, jnp.where(valid, tgt, 0)[..., None], -1)[..., 0]
  return jnp.where(valid, nll, 0.0), valid


def lm_loss(logits, labels) -> tuple[jax.Array, dict[str, jax.Array]]:
  """Mean NLL over all labelled tokens of the batch (official averaging)."""
  nll, valid = token_nll(logits, labels)
  n = valid.sum()
  loss = nll.sum() / jnp.maximum(n, 1)
  pred = jnp.argmax(logits[:, :-1], -1)
  acc = ((pred == labels[:, 1:]) & valid).sum() / jnp.maximum(n, 1)
  return loss, {"token_accuracy": acc, "num_tokens": n.astype(jnp.float32)}


def sequence_scores(logits, labels) -> tuple[jax.Array, jax.Array]:
  """Per-row (summed NLL [B], labelled tokens [B]) for Acc@50 ranking."""
  nll, valid = token_nll(logits, labels)
  return nll.sum(-1), valid.sum(-1)
