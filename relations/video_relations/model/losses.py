"""Set-prediction losses: Hungarian-matched detection loss, appearance
contrastive loss and multi-label predicate loss (all jittable).

Detection (DETR, Carion et al. 2020): per frame, queries are matched one to
one to the ground-truth boxes (`matching.hungarian_match`); matched queries
learn the class and the box (L1 + generalized IoU), unmatched ones learn
"no object" with weight `eos_coef`. Box terms are normalised by the number of
ground-truth boxes in the batch.
"""

import jax
import jax.numpy as jnp

from relations.video_relations import boxes as box_lib
from relations.video_relations.model import matching


def detection_loss(
  logits,
  pred_boxes,
  tgt_labels,
  tgt_boxes,
  tgt_valid,
  *,
  eos_coef=0.1,
  w_class=1.0,
  w_l1=5.0,
  w_giou=2.0,
):
  """Hungarian set loss for a batch of frames.

  Args:
    logits: `[N, Q, C + 1]` (last = no object); pred_boxes: `[N, Q, 4]`
      cxcywh in [0, 1].
    tgt_labels: `[N, M]` int; tgt_boxes: `[N, M, 4]` cxcywh; tgt_valid:
      `[N, M]` bool.
    eos_coef: weight of the no-object class in the classification loss.
    w_class, w_l1, w_giou: weights of the three terms (also used as
      matching costs).

  Returns:
    `(loss, metrics, match)`: scalar loss, dict of scalars (`class`, `l1`,
    `giou`), and `[N, M]` matched query per target (-1 if not valid).
  """
  n, q, c1 = logits.shape
  match = matching.hungarian_match(
    logits, pred_boxes, tgt_labels, tgt_boxes, tgt_valid, w_class=w_class, w_l1=w_l1, w_giou=w_giou
  )
  valid = tgt_valid & (match >= 0)
  # Class target per query: its matched label, else no-object (= C).
  q_idx = jnp.where(valid, match, q)  # out-of-range index is dropped
  cls_t = jnp.full((n, q + 1), c1 - 1, jnp.int32)
  cls_t = jax.vmap(lambda ct, qi, lab: ct.at[qi].set(lab, mode="drop"))(
    cls_t, q_idx, tgt_labels.astype(jnp.int32)
  )[:, :q]
  weight = jnp.where(cls_t == c1 - 1, eos_coef, 1.0)
  logp = jax.nn.log_softmax(logits, -1)
  nll = -jnp.take_along_axis(logp, cls_t[..., None], -1)[..., 0]
  loss_class = (nll * weight).sum() / jnp.maximum(weight.sum(), 1e-6)
  matched = jnp.take_along_axis(pred_boxes, jnp.maximum(match, 0)[..., None], axis=1)  # [N, M, 4]
  vf = valid.astype(jnp.float32)
  num = jnp.maximum(vf.sum(), 1.0)
  l1 = (jnp.abs(matched - tgt_boxes).sum(-1) * vf).sum() / num
  giou = box_lib.elementwise_giou(
    box_lib.cxcywh_to_xyxy(matched), box_lib.cxcywh_to_xyxy(tgt_boxes)
  )
  l_giou = ((1.0 - giou) * vf).sum() / num
  loss = w_class * loss_class + w_l1 * l1 + w_giou * l_giou
  return loss, {"class": loss_class, "l1": l1, "giou": l_giou}, match


def embedding_loss(emb, match, valid, slot_ids, temperature=0.1):
  """Supervised contrastive loss tying one object's queries across frames.

  Args:
    emb: `[B, T, Q, E]` L2-normalised query embeddings.
    match: `[B, T, M]` matched query per target slot (-1 = none).
    valid: `[B, T, M]` bool.
    slot_ids: `[M]` or `[B, T, M]` identity of each target (same id = same
      object within a clip).
    temperature: softmax temperature.

  Returns:
    Scalar: mean over anchors with at least one positive (same object in
    another frame) of -log(sum_pos exp(s) / sum_others exp(s)).
  """
  b, t, m = match.shape
  e = jnp.take_along_axis(emb, jnp.maximum(match, 0)[..., None], axis=2)
  e = e.reshape(b, t * m, -1)
  v = (valid & (match >= 0)).reshape(b, t * m)
  ids = jnp.broadcast_to(slot_ids, (b, t, m)).reshape(b, t * m)
  frame = jnp.broadcast_to(jnp.arange(t)[:, None], (t, m)).reshape(t * m)
  sim = jnp.einsum("bie,bje->bij", e, e) / temperature
  pair_ok = v[:, :, None] & v[:, None, :] & ~jnp.eye(t * m, dtype=bool)[None]
  pos = pair_ok & (ids[:, :, None] == ids[:, None, :]) & (frame[:, None] != frame[None, :])[None]
  sim = jnp.where(pair_ok, sim, -1e9)
  log_all = jax.nn.logsumexp(sim, axis=-1)
  log_pos = jax.nn.logsumexp(jnp.where(pos, sim, -1e9), axis=-1)
  has_pos = pos.any(-1) & v
  per = jnp.where(has_pos, log_all - log_pos, 0.0)
  return per.sum() / jnp.maximum(has_pos.sum(), 1)


def predicate_loss(logits, labels, valid, gamma=0.0):
  """Multi-label (sigmoid) loss per pair, optionally focal.

  Args:
    logits: `[..., K]`; labels: `[..., K]` in {0, 1}; valid: `[...]` bool.
    gamma: focal exponent (0 = binary cross-entropy).

  Returns:
    Scalar: sum over predicates, mean over valid pairs.
  """
  labels = labels.astype(jnp.float32)
  logp = jax.nn.log_sigmoid(logits)
  lognp = jax.nn.log_sigmoid(-logits)
  ce = -(labels * logp + (1 - labels) * lognp)
  if gamma:
    p_t = jnp.exp(labels * logp + (1 - labels) * lognp)
    ce = ce * (1 - p_t) ** gamma
  vf = valid.astype(jnp.float32)
  return (ce.sum(-1) * vf).sum() / jnp.maximum(vf.sum(), 1.0)
