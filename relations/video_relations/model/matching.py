"""Hungarian matching for set-prediction detection (DETR-style), on device.

The cost matrix is computed in JAX (inside the jitted loss) and the optimal
assignment is solved there too (`assign`: the shortest-augmenting-path
algorithm of `scipy.optimize.linear_sum_assignment`, with its tie-breaking,
as `lax.while_loop`s vmapped over frames), so the train step has no
device -> host -> device round trip.
"""

import jax
import jax.numpy as jnp

from relations.video_relations import boxes as box_lib


def match_cost(logits, pred_boxes, tgt_labels, tgt_boxes, *, w_class=1.0, w_l1=5.0, w_giou=2.0):
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
  _, giou = box_lib.pairwise_iou_giou(
    box_lib.cxcywh_to_xyxy(pred_boxes), box_lib.cxcywh_to_xyxy(tgt_boxes)
  )
  return w_class * c_class + w_l1 * c_l1 - w_giou * giou


# --- exact assignment on device -------------------------------------------------------------
# Shortest augmenting path (Jonker-Volgenant / Crouse 2016), the algorithm scipy's
# `linear_sum_assignment` implements, written step for step in the same order of floating-point
# operations and with the same tie-breaking (scipy scans its "remaining" columns in an order it
# maintains by swap-removal; `pos` below is that order). In float64 it therefore returns scipy's
# assignment bit for bit; in float32 it does when the arithmetic is exact (integer costs, costs on
# a dyadic grid) and otherwise an assignment whose cost differs from scipy's only through float32
# rounding of the dual variables.


def _solve_wide(cost, row_valid, col_valid):
  """Min-cost assignment of every valid row to a distinct valid column, one [R, C] matrix.

  Args:
    cost: `[R, C]` finite float costs.
    row_valid: `[R]` bool, rows to assign (the others are skipped, as if absent).
    col_valid: `[C]` bool, columns that may be used (the others are absent).
    Requires sum(row_valid) <= sum(col_valid).

  Returns:
    `[R]` int32: the column of each valid row, -1 for invalid rows (and for valid rows beyond
    the number of valid columns, when that requirement is broken).
  """
  r_n, c_n = cost.shape
  dtype = cost.dtype
  inf = jnp.array(jnp.inf, dtype)
  rows = jnp.arange(r_n, dtype=jnp.int32)
  # scipy fills `remaining` with the columns in reverse order (nc-1 ... 0); `pos[j]` is column
  # j's place in that list, -1 once it left it (or when it is not a valid column).
  n_cols = jnp.sum(col_valid).astype(jnp.int32)
  rank_desc = jnp.cumsum(col_valid[::-1].astype(jnp.int32))[::-1] - 1  # valid cols after j
  pos0 = jnp.where(col_valid, rank_desc, -1).astype(jnp.int32)

  def augment_row(cur, carry):
    u, v, col4row, row4col = carry
    live = row_valid[cur]

    def search_cond(s):
      return s["sink"] == -1

    def search_body(s):
      i = s["i"]
      sr = s["sr"].at[i].set(True)
      rem = s["pos"] >= 0
      r = s["min_val"] + cost[i] - u[i] - v
      better = rem & (r < s["spc"])
      path = jnp.where(better, i, s["path"])
      spc = jnp.where(better, r, s["spc"])
      lowest = jnp.min(jnp.where(rem, spc, inf))
      ties = rem & (spc == lowest)
      free_ties = ties & (row4col < 0)
      big = jnp.int32(c_n + 1)
      # The scan keeps the first tie unless a later one (or it) is a free column, then the last
      # free one.
      j_free = jnp.argmax(jnp.where(free_ties, s["pos"], -1))
      j_first = jnp.argmin(jnp.where(ties, s["pos"], big))
      j = jnp.where(jnp.any(free_ties), j_free, j_first).astype(jnp.int32)
      p_sel = s["pos"][j]
      # Swap-remove: the column at the end of the list takes j's place.
      last = s["num_rem"] - 1
      pos = jnp.where(s["pos"] == last, p_sel, s["pos"])
      pos = pos.at[j].set(-1)
      any_left = s["num_rem"] > 0
      sink = jnp.where(any_left, jnp.where(row4col[j] < 0, j, -1), -2)
      return dict(
        i=jnp.where(row4col[j] < 0, i, row4col[j]).astype(jnp.int32),
        sr=sr,
        sc=s["sc"].at[j].set(True),
        spc=spc,
        path=path,
        pos=pos,
        num_rem=s["num_rem"] - 1,
        min_val=lowest,
        sink=sink.astype(jnp.int32),
      )

    init = dict(
      i=cur,
      sr=jnp.zeros(r_n, bool),
      sc=jnp.zeros(c_n, bool),
      spc=jnp.full(c_n, inf),
      path=jnp.full(c_n, -1, jnp.int32),
      pos=pos0,
      num_rem=n_cols,
      min_val=jnp.zeros((), dtype),
      sink=jnp.where(live & (n_cols > 0), -1, -2).astype(jnp.int32),
    )
    s = jax.lax.while_loop(search_cond, search_body, init)
    ok = s["sink"] >= 0
    min_val, spc = s["min_val"], s["spc"]
    # Dual update, in scipy's order of operations.
    upd_u = s["sr"] & (rows != cur) & ok
    u_new = jnp.where(upd_u, u + (min_val - spc[jnp.maximum(col4row, 0)]), u)
    u_new = u_new.at[cur].set(jnp.where(ok, u[cur] + min_val, u[cur]))
    v_new = jnp.where(s["sc"] & ok, v - (min_val - spc), v)

    def aug_cond(a):
      return ~a[2]

    def aug_body(a):
      col4row, row4col, _, j = a
      i = s["path"][j]
      row4col = row4col.at[j].set(i)
      nxt = col4row[i]
      col4row = col4row.at[i].set(j)
      return col4row, row4col, i == cur, nxt

    col4row, row4col, _, _ = jax.lax.while_loop(
      aug_cond, aug_body, (col4row, row4col, ~ok, jnp.maximum(s["sink"], 0))
    )
    return u_new, v_new, col4row, row4col

  carry = (
    jnp.zeros(r_n, dtype),
    jnp.zeros(c_n, dtype),
    jnp.full(r_n, -1, jnp.int32),
    jnp.full(c_n, -1, jnp.int32),
  )
  _, _, col4row, _ = jax.lax.fori_loop(0, r_n, augment_row, carry)
  return col4row


def assign(cost, row_valid=None, col_valid=None):
  """Exact min-cost assignment on device for a batch of padded matrices (jit- and vmap-safe).

  Args:
    cost: `[..., R, C]` float costs; non-finite entries are treated as 1e9 (never preferred).
    row_valid: `[..., R]` bool (default all): rows to assign.
    col_valid: `[..., C]` bool (default all): columns available.
    Each matrix needs at least as many valid columns as valid rows (the wide orientation);
    transpose tall problems first (`linear_sum_assignment` does).

  Returns:
    `[..., R]` int32 column per row, -1 for invalid rows. On the valid submatrix this is the
    assignment `scipy.optimize.linear_sum_assignment` returns (bit-identical logic; see above).
  """
  cost = jnp.asarray(cost)
  if not jnp.issubdtype(cost.dtype, jnp.floating):
    cost = cost.astype(jnp.float32)
  cost = jnp.where(jnp.isfinite(cost), cost, jnp.asarray(1e9, cost.dtype))
  batch = cost.shape[:-2]
  if row_valid is None:
    row_valid = jnp.ones(cost.shape[:-1], bool)
  if col_valid is None:
    col_valid = jnp.ones((*batch, cost.shape[-1]), bool)
  fn = _solve_wide
  for _ in batch:
    fn = jax.vmap(fn)
  return fn(cost, jnp.asarray(row_valid, bool), jnp.asarray(col_valid, bool))


def linear_sum_assignment(cost):
  """JAX counterpart of `scipy.optimize.linear_sum_assignment` for one `[n, m]` matrix.

  Returns `(row_ind, col_ind)`, each `[min(n, m)]` int32, sorted by row, like scipy's.
  """
  cost = jnp.asarray(cost)
  n, m = cost.shape
  if n <= m:
    return jnp.arange(n, dtype=jnp.int32), assign(cost)
  row4col = assign(cost.T)  # [m]: the row of each column
  order = jnp.argsort(row4col)
  return row4col[order], order.astype(jnp.int32)


def hungarian_match(logits, pred_boxes, tgt_labels, tgt_boxes, tgt_valid, **cost_kw):
  """Matches queries to targets for a batch of frames (jit-compatible, on device).

  Args:
    logits: `[N, Q, C + 1]`; pred_boxes: `[N, Q, 4]` cxcywh in [0, 1].
    tgt_labels: `[N, M]` int; tgt_boxes: `[N, M, 4]`; tgt_valid: `[N, M]` bool.
    **cost_kw: weights passed to `match_cost`.

  Returns:
    `[N, M]` int32 matched query per target (-1 where not valid). Carries no
    gradient (the assignment is a discrete choice).

  Raises:
    ValueError: M > Q (some frame could hold more targets than there are queries).
  """
  q, m = logits.shape[1], tgt_labels.shape[1]
  if m > q:
    raise ValueError(
      f"{m} target slots but only {q} queries; raise model.num_queries or lower input.max_objects"
    )
  cost = jax.vmap(lambda l, b, t, tb: match_cost(l, b, t, tb, **cost_kw))(
    logits, pred_boxes, jnp.maximum(tgt_labels, 0), tgt_boxes
  )
  cost = jax.lax.stop_gradient(cost)
  # Targets are the rows (M <= Q): scipy, given the [Q, M_valid] matrix,
  # transposes it the same way whenever M_valid < Q.
  return assign(jnp.swapaxes(cost, 1, 2), tgt_valid)
