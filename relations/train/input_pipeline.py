"""Deterministic, per-process, resumable input pipeline over random-access sources.

Training stream: the data order is a pure function of (seed, step). Position q of the infinite
stream lies in epoch e = q // N at index perm_e[q % N], where perm_e is a permutation seeded by
(seed, e). The global batch of step s covers positions [s*G, (s+1)*G); process p reads only its
contiguous slice of G / process_count positions, so processes read disjoint examples (per-process
shards) and a run restarted at step s continues with exactly the batch an uninterrupted run would
have seen. Each example is preprocessed with an rng seeded by (seed, e, index), so augmentation is
reproducible too.

The stream runs on grain (`TrainStream.dataset`): optional worker processes (`num_workers`, grain's
`mp_prefetch`) and reader threads prepare whole batches, so neither changes the data order.

Worker batches travel through shared memory (`relations.train.shm_transport`).

Evaluation has its own sharded loop (`relations.train.eval_loop`).
"""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable, Iterator, Mapping

import jax
import numpy as np
from jax.sharding import Mesh

from relations.train import sharding
from relations.train import shm_transport

Example = Mapping[str, Any]
Preprocess = Callable[[Example, np.random.Generator], dict]


def stack(examples: list[dict]) -> dict[str, np.ndarray]:
  """Stacks a list of equally-shaped example dicts into a batch dict."""
  return {k: shm_transport.stack_feature(examples, k) for k in examples[0]}


def _worker_init(worker_index: int, num_workers: int) -> None:
  """Runs first in each grain worker: SIGTERM and SIGINT are the trainer's to act on.

  A preempted SLURM step or TPU VM signals every process, workers included; a worker that died of
  it would leave the trainer waiting for batches before the step where all processes agreed to
  stop. The trainer stops the workers itself when it closes the stream (`iterate`).
  """
  del worker_index, num_workers
  signal.signal(signal.SIGTERM, signal.SIG_IGN)
  signal.signal(signal.SIGINT, signal.SIG_IGN)


# Seconds `iterate` waits for the stream (and its workers) to close before killing the workers.
CLOSE_TIMEOUT_S = 20.0


def _close_within(it, timeout: float) -> None:
  """`it.close()`, given at most `timeout` seconds; then any grain worker left is killed."""
  close = getattr(it, "close", None)
  if close is None:
    return
  done = threading.Event()

  def run():
    try:
      close()
    finally:
      done.set()

  threading.Thread(target=run, daemon=True, name="close-input").start()
  if done.wait(timeout):
    return
  import multiprocessing  # pylint: disable=g-import-not-at-top
  from absl import logging  # pylint: disable=g-import-not-at-top

  workers = [p for p in multiprocessing.active_children() if p.name.startswith("grain-")]
  logging.warning(
    "The input stream did not close within %.0f s; killing %d worker(s)", timeout, len(workers)
  )
  for p in workers:
    p.kill()


def to_global(local_batch: dict[str, np.ndarray], mesh: Mesh) -> dict[str, jax.Array]:
  """Assembles per-process batches into global arrays sharded on the batch axes."""
  sh = sharding.batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sh, v) for k, v in local_batch.items()}


class _Reader:
  """Local position j of this process -> preprocessed example (picklable, for grain workers).

  Local position j is row j % local_batch of step j // local_batch; see the module docstring for
  its global position, epoch, source index and rng.
  """

  def __init__(
    self,
    source,
    preprocess: Preprocess,
    seed: int,
    n: int,
    global_batch: int,
    local_batch: int,
    process_index: int,
  ):
    self.source, self.preprocess, self.seed, self.n = source, preprocess, seed, n
    self.global_batch, self.local_batch, self.pi = global_batch, local_batch, process_index
    self._perms: dict[int, np.ndarray] = {}

  def __getstate__(self):
    return {k: v for k, v in self.__dict__.items() if k != "_perms"}

  def __setstate__(self, state):  # in a grain worker
    self.__dict__.update(state, _perms={})
    shm_transport.tune_allocator()
    shm_transport.exit_with_parent()

  def perm(self, epoch: int) -> np.ndarray:
    if epoch not in self._perms:
      if len(self._perms) > 4:
        self._perms.pop(min(self._perms))
      self._perms[epoch] = np.random.default_rng([self.seed, epoch]).permutation(self.n)
    return self._perms[epoch]

  def position(self, j: int) -> tuple[int, int]:
    """(epoch, source index) of local position j."""
    step, k = divmod(int(j), self.local_batch)
    q = step * self.global_batch + self.pi * self.local_batch + k
    epoch, r = divmod(q, self.n)
    return epoch, int(self.perm(epoch)[r])

  def __call__(self, j: int) -> dict:
    epoch, idx = self.position(j)
    rng = np.random.default_rng([self.seed, epoch, idx])
    return self.preprocess(self.source[idx], rng)


class TrainStream:
  """Batches for step s on grain; see the module docstring for the order.

  The grain pipeline is `MapDataset.range(local positions of the steps asked for)`, mapped through
  the reader and batched into whole local batches *before* any parallelism: each element is the
  batch of one step. Reader threads (`num_threads`) and worker processes (`num_workers`, grain's
  `mp_prefetch`, each taking every W-th batch) only change who computes a batch, never its
  content or place, so the stream is the same for any thread or worker count and a resumed run
  (`iterate(s, ...)`) continues with exactly the batches an uninterrupted run would have seen.

  Args:
    source: random-access source (`len`, `[i]`); picklable when `num_workers` > 0.
    preprocess: (example, rng) -> dict of fixed-shape arrays; picklable when `num_workers` > 0
      (grain sends it to the workers with cloudpickle).
    global_batch: examples per step over all processes.
    seed: data seed.
    process_index, process_count: this process and the number of processes (default: JAX's).
    num_threads: batches prepared concurrently per process (0: one at a time, in this thread).
    num_workers: grain worker processes (0: none).
  """

  def __init__(
    self,
    source,
    preprocess: Preprocess,
    global_batch: int,
    seed: int,
    process_index: int | None = None,
    process_count: int | None = None,
    num_threads: int = 2,
    num_workers: int = 0,
  ):
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
    self.num_threads = int(num_threads)
    self.num_workers = int(num_workers)
    self._reader = _Reader(
      source, preprocess, self.seed, self.n, global_batch, self.local_batch, self.pi
    )
    if self.num_workers == 0:  # preprocessing runs in this process
      shm_transport.tune_allocator()

  def positions(self, step: int) -> list[tuple[int, int]]:
    """(epoch, source index) pairs this process reads at `step`."""
    first = step * self.local_batch
    return [self._reader.position(j) for j in range(first, first + self.local_batch)]

  def local_batch_at(self, step: int) -> dict[str, np.ndarray]:
    """This process's batch of `step`, computed here (no threads, no workers)."""
    first = step * self.local_batch
    return stack([self._reader(j) for j in range(first, first + self.local_batch)])

  def dataset(self, start_step: int, end_step: int, prefetch: int = 2):
    """The grain IterDataset of the local batches of steps [start_step, end_step)."""
    import grain  # pylint: disable=g-import-not-at-top

    lb = self.local_batch
    ds = grain.MapDataset.range(start_step * lb, end_step * lb).map(self._reader)
    ds = ds.batch(lb, batch_fn=shm_transport.stack_to_shm if self.num_workers > 0 else stack)
    ds = ds.to_iter_dataset(
      grain.ReadOptions(
        num_threads=max(self.num_threads, 1),
        prefetch_buffer_size=max(prefetch, 1) if self.num_threads else 0,
      )
    )
    if self.num_workers > 0:
      from absl import flags  # pylint: disable=g-import-not-at-top

      if not flags.FLAGS.is_parsed():
        # grain reads its (absl) debug flags when it starts workers; outside an absl app (tests,
        # benches, notebooks) they are unparsed, so use their defaults.
        flags.FLAGS.mark_as_parsed()
      ds = ds.mp_prefetch(
        grain.MultiprocessingOptions(
          num_workers=self.num_workers, per_worker_buffer_size=max(prefetch, 1)
        ),
        worker_init_fn=_worker_init,
      )
      # In this process: the batches, viewed in the workers' shared memory.
      ds = ds.map(shm_transport.Attach())
    return ds

  def iterate(
    self, start_step: int, end_step: int, prefetch: int = 2
  ) -> Iterator[tuple[int, dict]]:
    """Yields (step, local numpy batch), preparing up to `prefetch` batches ahead per reader."""
    if end_step <= start_step:
      return
    it = iter(self.dataset(start_step, end_step, prefetch))
    try:
      for step, batch in zip(range(start_step, end_step), it):
        yield step, batch
    finally:
      _close_within(it, CLOSE_TIMEOUT_S)
