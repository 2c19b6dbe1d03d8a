"""The on-device assignment (`matching.assign`) against scipy's linear_sum_assignment.

2,400 random matrices, sizes 1x1 .. 100x300 in both orientations, four kinds of cost: small
integers (many ties), continuous float32, a dyadic grid (exact float32 arithmetic) and
constant matrices (every assignment ties). Each must give scipy's total cost; the assignment
itself must be scipy's too: the JAX code runs scipy's algorithm with its tie-breaking.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize

from relations.video_relations.model import matching

# (max rows, max cols, number of matrices): padded buckets, each one jitted call.
_BUCKETS = [(10, 30, 1000), (40, 120, 800), (100, 300, 600)]


def _random_cost(rng, n, m, kind):
  if kind == 0:
    return rng.integers(0, 4, (n, m)).astype(np.float32)
  if kind == 1:
    return rng.random((n, m), np.float32)
  if kind == 2:
    return (rng.integers(-(2**11), 2**11, (n, m)) / 256).astype(np.float32)
  return np.full((n, m), 0.25, np.float32)


def _bucket(seed, max_r, max_c, count):
  """Random matrices (tall ones transposed, as scipy does) padded into one [count, R, C]."""
  rng = np.random.default_rng(seed)
  mats, tall = [], []
  cost = np.full((count, max_r, max_c), 7.0, np.float32)  # padding must never matter
  rv, cv = np.zeros((count, max_r), bool), np.zeros((count, max_c), bool)
  for b in range(count):
    n, m = int(rng.integers(1, max_r + 1)), int(rng.integers(1, max_c + 1))
    if b % 4 == 3:  # a square one now and then
      m = n
    c = _random_cost(rng, n, m, b % 7 % 4)
    if b % 2:  # tall input: scipy solves its transpose
      c = c.T.copy()
    mats.append(c)
    w = c if c.shape[0] <= c.shape[1] else c.T
    tall.append(c.shape[0] > c.shape[1])
    cost[b, : w.shape[0], : w.shape[1]] = w
    rv[b, : w.shape[0]], cv[b, : w.shape[1]] = True, True
  return mats, tall, cost, rv, cv


@pytest.mark.parametrize("bucket", range(len(_BUCKETS)))
def test_assignment_equals_scipy(bucket):
  max_r, max_c, count = _BUCKETS[bucket]
  mats, tall, cost, rv, cv = _bucket(bucket, max_r, max_c, count)
  got = np.asarray(jax.jit(matching.assign)(cost, rv, cv))
  kinds_seen = set()
  for b, c in enumerate(mats):
    rows, cols = scipy.optimize.linear_sum_assignment(c.astype(np.float64))
    w = c.T if tall[b] else c
    col4row = got[b, : w.shape[0]]
    assert (got[b, w.shape[0] :] == -1).all()
    assert len(set(col4row.tolist())) == w.shape[0] and (col4row < w.shape[1]).all()
    if tall[b]:
      ours_r, ours_c = col4row[np.argsort(col4row)], np.argsort(col4row)
    else:
      ours_r, ours_c = np.arange(w.shape[0]), col4row
    c64 = c.astype(np.float64)
    assert c64[ours_r, ours_c].sum() == c64[rows, cols].sum(), (b, c.shape)
    np.testing.assert_array_equal(ours_r, rows, err_msg=f"matrix {b} {c.shape}")
    np.testing.assert_array_equal(ours_c, cols, err_msg=f"matrix {b} {c.shape}")
    kinds_seen.add((b % 7 % 4, tall[b]))
  assert len(kinds_seen) == 8


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (5, 5), (9, 4), (4, 9)])
def test_linear_sum_assignment_api_matches_scipy(shape):
  rng = np.random.default_rng(sum(shape))
  for kind in range(4):
    c = _random_cost(rng, *shape, kind)
    rows, cols = scipy.optimize.linear_sum_assignment(c)
    r, k = jax.jit(matching.linear_sum_assignment)(c)
    np.testing.assert_array_equal(r, rows)
    np.testing.assert_array_equal(k, cols)


def test_non_finite_costs_rank_last():
  c = np.array([[np.nan, 1.0], [0.0, np.inf]], np.float32)
  np.testing.assert_array_equal(matching.assign(c), [1, 0])


def test_hungarian_match_equals_scipy_per_frame():
  rng = np.random.default_rng(3)
  n, q, m, k = 12, 8, 5, 4
  logits = jnp.asarray(rng.normal(size=(n, q, k + 1)), jnp.float32)
  boxes = jnp.asarray(rng.uniform(0.2, 0.6, (n, q, 4)), jnp.float32)
  tgt_boxes = jnp.asarray(rng.uniform(0.2, 0.6, (n, m, 4)), jnp.float32)
  labels = jnp.asarray(rng.integers(0, k, (n, m)))
  valid = rng.random((n, m)) < 0.6
  valid[0] = False
  got = np.asarray(jax.jit(matching.hungarian_match)(logits, boxes, labels, tgt_boxes, valid))
  cost = np.asarray(jax.vmap(matching.match_cost)(logits, boxes, labels, tgt_boxes))
  for i in range(n):
    cols = np.flatnonzero(valid[i])
    assert (got[i][~valid[i]] == -1).all()
    if cols.size:
      rows, cc = scipy.optimize.linear_sum_assignment(cost[i][:, cols])
      np.testing.assert_array_equal(got[i, cols[cc]], rows)


def test_too_many_target_slots_is_a_clear_error():
  with pytest.raises(ValueError, match="3 target slots but only 2 queries"):
    matching.hungarian_match(
      jnp.zeros((1, 2, 4)),
      jnp.zeros((1, 2, 4)),
      jnp.zeros((1, 3), int),
      jnp.zeros((1, 3, 4)),
      jnp.ones((1, 3), bool),
    )
