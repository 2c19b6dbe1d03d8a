"""Hungarian matching for set-prediction detection (DETR-style).

The cost matrix is computed in JAX (inside the jitted loss); the optimal
assignment runs on the host with `scipy.optimize.linear_sum_assignment`
through `jax.pure_callback`, because the Hungarian algorithm is sequential
and tiny (queries x objects per frame) - moving it to the accelerator buys
nothing.
"""

import jax
import jax.numpy as jnp
import numpy as np
import scipy.optimize

from relations.video_relations import boxes as box_lib


def match_cost(logits, pred_boxes, tgt_labels, tgt_boxes, *, w_class=1.0,
               w_l1=5.0, w_giou=2.0):
  """Matching cost between the queries and the targets of one frame.

  Args:
    logits: `[Q, C + 1]` class logits (last class = no object).
    pred_boxes: `[Q, 4]` predicted cxcywh boxes in [0, 1].
    tgt_labels: `[M]` int target categories in [0, C).
    tgt_boxes: `[M, 4]` target cxcywh boxes in [0, 1].
    w_class, w_l1, w_giou: weights of -p(class), L1 and -GIoU (DETR's 1/5/2).

  Returns:
    `[Q, M]` float32 cost (lower is a better match).
  """
  prob = jax.nn.softmax(logits, axis=-1)
  c_class = -jnp.take(prob, tgt_labels, axis=-1)
  c_l1 = jnp.abs(pred_boxes[:, None, :] - tgt_boxes[None, :, :]).sum(-1)
  _, giou = box_lib.pairwise_iou_giou(box_lib.cxcywh_to_xyxy(pred_boxes),
                                      box_lib.cxcywh_to_xyxy(tgt_boxes))
  return w_class * c_class + w_l1 * c_l1 - w_giou * giou


def assign_host(cost, valid):
  """Optimal assignment on the host.

  Args:
    cost: `[N, Q, M]` costs (N independent frames).
    valid: `[N, M]` bool, which targets exist (padding is ignored).

  Returns:
    `[N, M]` int32: the query matched to each target, -1 for padded targets.
    Requires Q >= number of valid targets in every frame.
  """
  cost = np.asarray(cost, np.float64)
  valid = np.asarray(valid, bool)
  n, q, m = cost.shape
  out = np.full((n, m), -1, np.int32)
  for i in range(n):
    cols = np.flatnonzero(valid[i])
    if cols.size == 0:
      continue
    if cols.size > q:
      raise ValueError(f"frame {i}: {cols.size} targets but only {q} queries; "
                       "raise model.num_queries")
    c = cost[i][:, cols]
    # Non-finite costs (diverged boxes) would make scipy raise; rank them last.
    c = np.where(np.isfinite(c), c, 1e9)
    rows, cc = scipy.optimize.linear_sum_assignment(c)
    out[i, cols[cc]] = rows
  return out


def hungarian_match(logits, pred_boxes, tgt_labels, tgt_boxes, tgt_valid,
                    **cost_kw):
  """Matches queries to targets for a batch of frames (jit-compatible).

  Args:
    logits: `[N, Q, C + 1]`; pred_boxes: `[N, Q, 4]` cxcywh in [0, 1].
    tgt_labels: `[N, M]` int; tgt_boxes: `[N, M, 4]`; tgt_valid: `[N, M]` bool.
    **cost_kw: weights passed to `match_cost`.

  Returns:
    `[N, M]` int32 matched query per target (-1 where not valid). Carries no
    gradient (the assignment is a discrete choice).
  """
  cost = jax.vmap(lambda l, b, t, tb: match_cost(l, b, t, tb, **cost_kw))(
      logits, pred_boxes, jnp.maximum(tgt_labels, 0), tgt_boxes)
  cost = jax.lax.stop_gradient(cost)
  n, m = tgt_labels.shape
  return jax.pure_callback(
      assign_host, jax.ShapeDtypeStruct((n, m), jnp.int32), cost, tgt_valid,
      vmap_method="sequential")
