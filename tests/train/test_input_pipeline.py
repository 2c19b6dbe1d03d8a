"""The grain-backed TrainStream: the batches of a step depend only on (seed, step), not on the
number of reader threads or worker processes, nor on the step a run (re)starts from."""

import functools

import numpy as np

from relations.train import input_pipeline
from relations.train import shm_transport
from tests import toy_task


def _stream(num_threads=0, num_workers=0, process_index=0, process_count=1):
  pre = functools.partial(toy_task.preprocess_train, config=toy_task.get_config())
  return input_pipeline.TrainStream(
    toy_task.Source(37, 8, 0),
    pre,
    8,
    3,
    process_index,
    process_count,
    num_threads=num_threads,
    num_workers=num_workers,
  )


def _reference(step, process_index=0, process_count=1):
  """The batch of `step` written out from the module docstring's definition."""
  src = toy_task.Source(37, 8, 0)
  local = 8 // process_count
  rows = []
  for q in range(step * 8 + process_index * local, step * 8 + (process_index + 1) * local):
    epoch, r = divmod(q, 37)
    idx = int(np.random.default_rng([3, epoch]).permutation(37)[r])
    rows.append(
      toy_task.preprocess_train(
        src[idx], np.random.default_rng([3, epoch, idx]), toy_task.get_config()
      )
    )
  return input_pipeline.stack(rows)


def _assert_same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_batches_are_a_pure_function_of_seed_and_step():
  want = {s: _reference(s) for s in range(12)}
  for threads in (0, 2):
    got = dict(_stream(threads).iterate(0, 12))
    assert sorted(got) == list(range(12))  # crosses 2 epochs of 37 examples
    for s in got:
      _assert_same(got[s], want[s])
  # Resuming at step 7 continues with exactly the batches of the full run.
  resumed = dict(_stream(2).iterate(7, 12))
  assert sorted(resumed) == list(range(7, 12))
  for s in resumed:
    _assert_same(resumed[s], want[s])


def test_worker_processes_give_the_same_stream():
  want = {s: _reference(s) for s in range(5, 11)}
  got = dict(_stream(1, num_workers=2).iterate(5, 11))
  assert sorted(got) == list(range(5, 11))
  for s in got:
    _assert_same(got[s], want[s])


def test_processes_read_disjoint_halves_of_the_global_batch():
  for pi in (0, 1):
    got = dict(_stream(0, 0, pi, 2).iterate(4, 6))
    for s in (4, 5):
      _assert_same(got[s], _reference(s, pi, 2))
  a, b = _stream(0, 0, 0, 2), _stream(0, 0, 1, 2)
  assert not set(a.positions(4)) & set(b.positions(4))


def test_worker_batches_in_shared_memory_stay_intact_while_held(monkeypatch):
  """Large arrays come back as views of the workers' reused shared memory: a batch the consumer
  holds is never overwritten by later ones, segments are reused, and no name is left behind.

  Reuse does not depend on timing: a worker has at most a few batches in flight (grain's bounded
  buffers), so over 20 batches a worker must take back segments the consumer released. (Over 8
  per worker, a slow consumer once saw 16 distinct segments.)"""
  import mmap  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top

  names = []
  call = shm_transport.Attach.__call__

  def record(self, batch):
    names.append(batch.name)
    return call(self, batch)

  monkeypatch.setattr(shm_transport.Attach, "__call__", record)
  pre = functools.partial(toy_task.preprocess_train, config=toy_task.get_config())
  src = toy_task.Source(37, 64, 0)  # 8 images of 64x64x3 float32: 393 KB a batch

  def stream(workers):
    return input_pipeline.TrainStream(src, pre, 8, 3, 0, 1, num_threads=1, num_workers=workers)

  steps = 40
  want = {s: stream(0).local_batch_at(s) for s in range(steps)}
  held = {}
  for s, b in stream(2).iterate(0, steps):
    assert b["image"].nbytes >= shm_transport.SHM_MIN_BYTES
    assert isinstance(b["image"].base.base, mmap.mmap)  # a view of a shared segment
    assert b["label"].base is None  # small arrays are pickled
    if s % 4 == 0 and s < 16:
      held[s] = b  # kept while the workers go on; the others' segments are reused
    else:
      _assert_same(b, want[s])
  assert sorted(held) == [0, 4, 8, 12]
  for s, b in held.items():
    _assert_same(b, want[s])
  assert len(names) == steps and len(set(names)) < steps  # reused
  assert not set(names) & set(os.listdir("/dev/shm"))
