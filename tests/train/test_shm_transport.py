"""The shared-memory batch transport on its own, in one process: what a worker sends, what the main
process gets back, and when a segment goes back to its worker. The worker-process path through
`TrainStream` is covered by tests/train/test_input_pipeline.py."""

import gc
import os

import numpy as np
import pytest

from relations.train import shm_transport


def _examples(n=4):
  # 48 KiB of pixels each: the stacked batch is over SHM_MIN_BYTES, the labels far under it.
  return [{"image": np.full((64, 64, 3), i, np.float32), "label": np.int32(i)} for i in range(n)]


def test_large_arrays_travel_in_a_segment_reused_once_the_batch_is_dropped():
  attach = shm_transport.Attach()
  sent = shm_transport.stack_to_shm(_examples())
  assert [k for k, *_ in sent.layout] == ["image"] and list(sent.small) == ["label"]
  got = attach(sent)
  assert list(got) == ["image", "label"]
  np.testing.assert_array_equal(got["image"], np.stack([e["image"] for e in _examples()]))
  np.testing.assert_array_equal(got["label"], np.arange(4, dtype=np.int32))
  assert sent.name not in os.listdir("/dev/shm")  # unlinked when first mapped

  held = shm_transport.stack_to_shm(_examples())  # the first batch is still alive: a new segment
  assert held.name != sent.name
  del got
  gc.collect()
  reused = shm_transport.stack_to_shm(_examples())
  assert reused.name == sent.name
  for batch in (attach(held), attach(reused)):  # maps (and unlinks) both before closing
    np.testing.assert_array_equal(batch["label"], np.arange(4, dtype=np.int32))
  attach.close()
  assert not {held.name, reused.name} & set(os.listdir("/dev/shm"))


def test_small_batches_and_ragged_features():
  small = shm_transport.stack_to_shm([{"x": np.zeros(3)}, {"x": np.ones(3)}])
  assert small.name is None and not small.layout
  np.testing.assert_array_equal(shm_transport.Attach()(small)["x"], [[0, 0, 0], [1, 1, 1]])
  with pytest.raises(ValueError, match=r"Feature 'x' has different shapes.*\[\(2,\), \(3,\)\]"):
    shm_transport.stack_to_shm([{"x": np.zeros(3)}, {"x": np.zeros(2)}])


def test_allocator_tuned_once_per_process():
  # glibc (this image): mallopt accepts both settings; a second call is a no-op.
  assert shm_transport.tune_allocator() is True
  assert shm_transport.tune_allocator() is True
