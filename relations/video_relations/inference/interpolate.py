"""Trajectories from sampled frames to every native frame.

The model sees frames sampled every `k` native frames; the official submission
needs one box per native frame of a relation's duration. Boxes are linearly
interpolated between the sampled frames that bracket a native frame and held
constant beyond the first/last observation (objects move little in k/fps
seconds, and extrapolating velocity overshoots on stops).
"""

import numpy as np


def interpolate_boxes(fids, boxes, start, end):
  """Boxes for every native frame in `[start, end)`.

  Args:
    fids: `[n]` strictly increasing native frame ids of the observations.
    boxes: `[n, 4]` boxes at those frames (any units).
    start: first native frame wanted (inclusive).
    end: last native frame wanted (exclusive).

  Returns:
    `[end - start, 4]` float64 boxes.

  Raises:
    ValueError: no observation, mismatched lengths or unsorted frame ids.
  """
  fids = np.asarray(fids, np.float64)
  boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
  if fids.ndim != 1 or fids.shape[0] != boxes.shape[0] or fids.shape[0] == 0:
    raise ValueError(
      f"need >= 1 observation with one box each, got "
      f"{fids.shape[0]} frame ids and {boxes.shape[0]} boxes"
    )
  if np.any(np.diff(fids) <= 0):
    raise ValueError(f"frame ids must increase strictly: {fids.tolist()}")
  t = np.arange(start, end, dtype=np.float64)
  # np.interp holds the end values outside [fids[0], fids[-1]].
  return np.stack([np.interp(t, fids, boxes[:, j]) for j in range(4)], -1)


def observed_span(fids, step, frame_count):
  """Native-frame span `[start, end)` attributed to a sampled trajectory.

  An object seen at sampled frames `f0 .. fn` (sampled every `step` frames)
  entered somewhere in `(f0 - step, f0]` and left in `(fn, fn + step]`; half a
  step on each side is the unbiased guess, which maximises expected vIoU.

  Args:
    fids: increasing native frame ids of the observations.
    step: native frames between consecutive sampled frames (>= 1).
    frame_count: number of native frames of the video.

  Returns:
    `(start, end)` ints, end exclusive, clipped to `[0, frame_count]`.
  """
  half = int(step) // 2
  start = max(0, int(fids[0]) - half)
  end = min(int(frame_count), int(fids[-1]) + int(step) - half)
  return start, max(end, start + 1)
