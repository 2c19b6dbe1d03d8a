"""Deterministic, per-process, resumable input pipeline over random-access sources.

Training stream: the data order is a pure function of (seed, step). Position q of the infinite
stream lies in epoch e = q // N at index perm_e[q % N], where perm_e is a permutation seeded by
(seed, e). The global batch of step s covers positions [s*G, (s+1)*G); process p reads only its
contiguous slice of G / process_count positions, so processes read disjoint examples (per-process
shards) and a run restarted at step s continues with exactly the batch an uninterrupted run would
have seen. Each example is preprocessed with an rng seeded by (seed, e, index), so augmentation is
reproducible too.

Evaluation has its own sharded loop (`relations.train.eval_loop`).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Callable, Iterator, Mapping

import jax
import numpy as np
from jax.sharding import Mesh

from relations.train import sharding

Example = Mapping[str, Any]
Preprocess = Callable[[Example, np.random.Generator], dict]


def stack(examples: list[dict]) -> dict[str, np.ndarray]:
  """Stacks a list of equally-shaped example dicts into a batch dict."""
  keys = examples[0].keys()
  out = {}
  for k in keys:
    try:
      out[k] = np.stack([np.asarray(e[k]) for e in examples])
    except ValueError as err:
      shapes = sorted({np.asarray(e[k]).shape for e in examples})
      raise ValueError(f"Feature {k!r} has different shapes across examples: {shapes}; "
                       "preprocessing must produce fixed shapes") from err
  return out


def to_global(local_batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Assembles per-process batches into global arrays sharded on the batch axes."""
  sh = sharding.batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sh, v) for k, v in local_batch.items()}


class TrainStream:
  """Batches for step s, by random access; see the module docstring for the order."""

  def __init__(self, source, preprocess: Preprocess, global_batch: int, seed: int,
               process_index: int | None = None, process_count: int | None = None,
               num_threads: int = 2):
    self.source = source
    self.n = len(source)
    if self.n == 0:
      raise ValueError("The training source is empty")
    self.preprocess = preprocess
    self.seed = int(seed)
    self.pi = jax.process_index() if process_index is None else process_index
    self.pc = jax.process_count() if process_count is None else process_count
    if global_batch % self.pc:
      raise ValueError(f"Global batch {global_batch} is not divisible by {self.pc} processes")
    self.global_batch = global_batch
    self.local_batch = global_batch // self.pc
    self._perms: dict[int, np.ndarray] = {}
    self._pool = concurrent.futures.ThreadPoolExecutor(num_threads) if num_threads else None

  def _perm(self, epoch: int) -> np.ndarray:
    if epoch not in self._perms:
      if len(self._perms) > 4:
        self._perms.pop(min(self._perms))
      self._perms[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.n)
    return self._perms[epoch]

  def positions(self, step: int) -> list[tuple[int, int]]:
    """(epoch, source index) pairs this process reads at `step`."""
    start = step * self.global_batch + self.pi * self.local_batch
    out = []
    for q in range(start, start + self.local_batch):
      epoch, r = divmod(q, self.n)
      out.append((epoch, int(self._perm(epoch)[r])))
    return out

  def _example(self, pos: tuple[int, int]) -> dict:
    epoch, idx = pos
    rng = np.random.default_rng([self.seed, epoch, idx])
    return self.preprocess(self.source[idx], rng)

  def local_batch_at(self, step: int) -> dict[str, np.ndarray]:
    pos = self.positions(step)
    if self._pool is None:
      return stack([self._example(p) for p in pos])
    return stack(list(self._pool.map(self._example, pos)))

  def iterate(self, start_step: int, end_step: int, prefetch: int = 2) -> Iterator[tuple[int, dict]]:
    """Yields (step, local numpy batch), preparing up to `prefetch` batches ahead."""
    if self._pool is None or prefetch <= 0:
      for s in range(start_step, end_step):
        yield s, self.local_batch_at(s)
      return
    with concurrent.futures.ThreadPoolExecutor(1) as ahead:
      futures = {}
      for s in range(start_step, min(end_step, start_step + prefetch)):
        futures[s] = ahead.submit(self.local_batch_at, s)
      for s in range(start_step, end_step):
        nxt = s + prefetch
        if nxt < end_step:
          futures[nxt] = ahead.submit(self.local_batch_at, nxt)
        yield s, futures.pop(s).result()
