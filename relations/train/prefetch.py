"""Device prefetch: the next batches are on the devices before the current step is waited on.

`jax.device_put` (and `input_pipeline.to_global`) only enqueue the host-to-device copy, so calling
it for batch N+1 right after dispatching step N overlaps the copy with step N's compute; with the
train loop not waiting on the host between logging steps, the devices never idle for input.
"""

from __future__ import annotations

import collections
from typing import Callable, Iterable, Iterator, TypeVar

T = TypeVar("T")


def to_device(items: Iterable[tuple[int, T]], put: Callable[[T], T], size: int = 2) -> Iterator:
  """Yields `(step, put(batch))` for `(step, batch)` in `items`, `size` transfers ahead.

  Args:
    items: the host stream, e.g. `TrainStream.iterate(start, total)`.
    put: host batch -> device batch (`lambda b: input_pipeline.to_global(b, mesh)`).
    size: batches transferred ahead of the one yielded (>= 1; each costs one batch of device
      memory).
  """
  if size < 1:
    raise ValueError(f"prefetch size must be >= 1, got {size}")
  it = iter(items)
  queue: collections.deque = collections.deque()

  def enqueue() -> bool:
    try:
      step, batch = next(it)
    except StopIteration:
      return False
    queue.append((step, put(batch)))
    return True

  while len(queue) < size and enqueue():
    pass
  while queue:
    item = queue.popleft()
    enqueue()  # batch N+size is on its way before step N runs
    yield item
