"""Batches from grain worker processes to the trainer, and the workers' process setup.

Worker batches travel through reused shared memory (`_ShmRing`): a worker stacks the batch's large
arrays straight into one of its segments and sends their layout; the main process maps each segment
once and returns views of it, and the segment goes back to the worker when the batch's last view is
dropped. A fresh segment per array and batch (grain's default) costs ~2.5 us per 4 KiB page to
allocate, fault in and free, in the worker and in the main process: about as much as preprocessing
itself for the ~8-10 MB feature and frame batches, and the main process's share capped what a second
worker adds.

The workers also tune glibc's allocator for preprocessing (`tune_allocator`, process-wide) and
exit when their parent dies (`exit_with_parent`); `relations.train.input_pipeline` calls both.
"""

from __future__ import annotations

import threading

import numpy as np


def stack_feature(
  examples: list[dict],
  key: str,
  out: np.ndarray | None = None,
  hint: str = "preprocessing must produce fixed shapes",
) -> np.ndarray:
  """`np.stack` of feature `key` over the examples (into `out` if given); a ValueError naming the
  feature, its shapes and `hint` when they differ."""
  try:
    return np.stack([np.asarray(e[key]) for e in examples], out=out)
  except ValueError as err:
    shapes = sorted({np.asarray(e[key]).shape for e in examples})
    raise ValueError(
      f"Feature {key!r} has different shapes across examples: {shapes}; {hint}"
    ) from err


_ALLOCATOR_TUNED = False


def tune_allocator() -> bool:
  """glibc malloc for preprocessing: allocations up to 32 MiB from the heap, freed heap kept up to
  256 MiB (once per process; False where there is no glibc `mallopt`).

  Preprocessing makes ~1 MB temporaries per array op (occlusion crops, video frames). By default
  glibc hands such blocks out as fresh mmapped pages or gives freed heap back to the kernel, so
  every op pays page faults again: ~15% of the occlusion pipeline's CPU (bench/input_pipeline.py).
  The stream's preprocessing processes call this: grain workers, or this process without workers.
  """
  global _ALLOCATOR_TUNED
  if _ALLOCATOR_TUNED:
    return True
  import ctypes  # pylint: disable=g-import-not-at-top

  try:
    mallopt = ctypes.CDLL("libc.so.6").mallopt
  except (OSError, AttributeError):
    return False
  m_trim_threshold, m_mmap_threshold = -1, -3
  _ALLOCATOR_TUNED = bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(
    mallopt(m_trim_threshold, 256 << 20)
  )
  return _ALLOCATOR_TUNED


_WATCHDOG = None


def exit_with_parent(poll_seconds: float = 0.5) -> bool:
  """In a worker process: exits it (releasing its shared memory) once its parent is gone.

  A trainer killed with SIGKILL (OOM killer, `scancel -s KILL`, a crashed host process) cannot
  stop its grain workers, which would otherwise live on holding ~300 MB each, their shared
  memory segments and multiprocessing's resource tracker. A daemon thread notices the parent's
  death (the process is re-parented, so `getppid` changes) and exits; multiprocessing's resource
  tracker then unlinks whatever the run left in /dev/shm and ends too. A watchdog rather than
  PR_SET_PDEATHSIG: that fires when the parent *thread* that started the worker ends, and grain
  may start workers from a thread. Does nothing in the main process; returns whether it started.
  """
  global _WATCHDOG
  import multiprocessing  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top

  if _WATCHDOG is not None or multiprocessing.parent_process() is None:
    return False
  parent = os.getppid()

  def watch():
    import time  # pylint: disable=g-import-not-at-top

    while os.getppid() == parent:
      time.sleep(poll_seconds)
    if _RING is not None:
      _RING.close()  # unlink the segments the main process never mapped
    os._exit(1)  # pylint: disable=protected-access

  _WATCHDOG = threading.Thread(target=watch, name="exit_with_parent", daemon=True)
  _WATCHDOG.start()
  return True


# Arrays of at least this many bytes travel in shared memory; smaller ones are pickled.
SHM_MIN_BYTES = 1 << 16
_HEADER = 64  # segment header: byte 0 = busy (set by the worker, cleared by the main process)


class _ShmRing:
  """This worker's reusable shared-memory segments (one per batch in flight).

  `acquire(nbytes)` returns a free segment (one whose busy byte the main process cleared, else a
  new one) marked busy. The main process unlinks a segment's name when it first maps it (and sets
  byte 1); the memory lives while a process maps it. At exit the worker unlinks the names the main
  process never saw.
  """

  def __init__(self):
    self.segments = []
    self.lock = threading.Lock()
    import atexit  # pylint: disable=g-import-not-at-top

    atexit.register(self.close)

  def close(self):
    with self.lock:
      for seg in self.segments:
        if not seg.buf[1]:
          try:
            seg.unlink()
          except FileNotFoundError:
            pass
      self.segments = []

  def acquire(self, nbytes: int):
    from multiprocessing import shared_memory  # pylint: disable=g-import-not-at-top

    with self.lock:
      for seg in self.segments:
        if seg.buf[0] == 0 and seg.size >= _HEADER + nbytes:
          seg.buf[0] = 1
          return seg
      seg = shared_memory.SharedMemory(create=True, size=_HEADER + nbytes)
      seg.buf[0] = 1
      self.segments.append(seg)
      return seg


_RING = None


def _ring() -> _ShmRing:
  global _RING
  if _RING is None:
    _RING = _ShmRing()
  return _RING


class ShmBatch:
  """A batch whose large arrays lie in a shared-memory segment: (key, offset, shape, dtype)."""

  def __init__(self, name, layout, small, keys):
    self.name, self.layout, self.small, self.keys = name, layout, small, keys


def stack_to_shm(examples: list[dict]) -> ShmBatch:
  """`stack`, with the large arrays written straight into a shared-memory segment (workers)."""
  keys = examples[0].keys()
  plan, small, offset = [], {}, 0
  for k in keys:
    first = np.asarray(examples[0][k])
    dtype = np.result_type(*[np.asarray(e[k]) for e in examples])  # as np.stack's
    shape = (len(examples),) + first.shape
    nbytes = int(np.prod(shape)) * dtype.itemsize
    if dtype.hasobject or nbytes < SHM_MIN_BYTES:
      small[k] = stack_feature(examples, k)
    else:
      plan.append((k, offset, shape, dtype.str))
      offset += -(-nbytes // 64) * 64
  if not plan:
    return ShmBatch(None, [], small, list(keys))
  seg = _ring().acquire(offset)
  try:
    for k, off, shape, dtype in plan:
      out = np.ndarray(shape, np.dtype(dtype), buffer=seg.buf, offset=_HEADER + off)
      stack_feature(examples, k, out=out)
      del out
  except BaseException:
    seg.buf[0] = 0
    raise
  return ShmBatch(seg.name, plan, small, list(keys))


class Attach:
  """Main process: `ShmBatch` -> dict of numpy arrays viewing the worker's segment.

  No copy: the arrays are views of the segment (mapped once per segment, so reading them costs no
  page faults either), and the segment goes back to its worker (busy byte cleared) when the last
  view of the batch is gone.
  """

  def __init__(self):
    self.mapped = {}  # segment name -> SharedMemory
    self.live = {}  # segment name -> batches alive
    self.closed = False

  def __call__(self, batch: ShmBatch) -> dict[str, np.ndarray]:
    import weakref  # pylint: disable=g-import-not-at-top

    out = dict(batch.small)
    if batch.name:
      seg = self.mapped.get(batch.name)
      if seg is None:
        from multiprocessing import shared_memory  # pylint: disable=g-import-not-at-top

        seg = shared_memory.SharedMemory(name=batch.name)
        seg.buf[1] = 1
        seg.unlink()  # both processes map it; no name left behind
        self.mapped[batch.name] = seg
        self.live[batch.name] = 0
      base = np.ndarray((seg.size - _HEADER,), np.uint8, buffer=seg.buf, offset=_HEADER)
      for k, off, shape, dtype in batch.layout:
        dt = np.dtype(dtype)
        n = int(np.prod(shape)) * dt.itemsize
        out[k] = base[off : off + n].view(dt).reshape(shape)
      self.live[batch.name] += 1
      # Not at interpreter exit: a run stopped by Ctrl-C exits with batches in flight, whose
      # memory jax arrays on one CPU device use in place (no copy); unmapping it then crashed the
      # process (SIGSEGV, tests/test_faults_data.py). The OS unmaps everything at exit anyway.
      weakref.finalize(base, self._release, batch.name).atexit = False
    return {k: out[k] for k in batch.keys}

  def _release(self, name):
    seg = self.mapped[name]
    seg.buf[0] = 0  # free for the worker's next batch
    self.live[name] -= 1
    if self.closed and not self.live[name]:
      seg.close()
      del self.mapped[name], self.live[name]

  def close(self):
    """Unmaps the segments no batch uses any more (the others when their last batch goes)."""
    self.closed = True
    for name in [n for n, c in self.live.items() if not c]:
      self.mapped.pop(name).close()
      del self.live[name]
