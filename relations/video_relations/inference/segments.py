"""Temporal segments over native frames.

The baseline (VidVRD-helper `segment_video`) uses `[(i, i + 30) for i in
range(fstart, fend - 30 + 1, 15)]`, which silently drops the tail of a video
whose length is not `30 + 15k` and every video shorter than 30 frames. We keep
its segments and, when `cover_tail` is set, add one last segment ending at
`fend` so that every frame is covered (relations at the end of a video can
still be detected).
"""


def segment_video(fstart, fend, length=30, stride=15, cover_tail=True):
  """Segments `[(start, end), ...]` (end exclusive) covering `[fstart, fend)`.

  Args:
    fstart: first native frame (inclusive).
    fend: last native frame (exclusive).
    length: segment length in native frames.
    stride: start-to-start distance in native frames.
    cover_tail: add `(max(fstart, fend - length), fend)` if the regular grid
      does not reach `fend` (and one segment for videos shorter than `length`).

  Returns:
    List of `(start, end)` int tuples sorted by start; empty if fend <= fstart.
  """
  if length <= 0 or stride <= 0:
    raise ValueError(f"segment length {length} and stride {stride} must be > 0")
  if fend <= fstart:
    return []
  segs = [(i, i + length) for i in range(fstart, fend - length + 1, stride)]
  if cover_tail and (not segs or segs[-1][1] < fend):
    segs.append((max(fstart, fend - length), fend))
  return segs
