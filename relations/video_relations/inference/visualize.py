"""Predictions drawn on video frames, written as an animated GIF (Pillow).

Each sampled frame shows the trajectories (box, id and category) and the
highest-scored relations active at that native frame.
"""

import numpy as np
from PIL import Image
from PIL import ImageDraw

from relations import io_util

_COLOURS = [
  (230, 25, 75),
  (60, 180, 75),
  (255, 225, 25),
  (0, 130, 200),
  (245, 130, 48),
  (145, 30, 180),
  (70, 240, 240),
  (240, 50, 230),
  (210, 245, 60),
  (250, 190, 212),
]


def draw_frames(
  frames, frame_indices, width, height, tracks, categories, relations, max_lines=3, scale=3
):
  """Annotated RGB frames.

  Args:
    frames: `[T, h, w, 3]` uint8 sampled frames.
    frame_indices: `[T]` native frame ids.
    width, height: native frame size (boxes are native pixels).
    tracks: `pipeline.TrackInfo` list.
    categories: class names.
    relations: `association.Relation` list (any order).
    max_lines: relations printed per frame.
    scale: upsampling factor of the output (small frames are unreadable).

  Returns:
    List of PIL images.
  """
  rels = sorted(relations, key=lambda r: -r.score)
  out = []
  for img, f in zip(np.asarray(frames), np.asarray(frame_indices)):
    h, w = img.shape[:2]
    im = Image.fromarray(img).resize((w * scale, h * scale), Image.NEAREST)
    canvas = Image.new("RGB", (w * scale, h * scale + 12 * max_lines))
    canvas.paste(im, (0, 0))
    d = ImageDraw.Draw(canvas)
    sx, sy = w * scale / width, h * scale / height
    for tr in tracks:
      if not tr.start <= f < tr.end:
        continue
      x1, y1, x2, y2 = tr.native_boxes[f - tr.start]
      c = _COLOURS[tr.track_id % len(_COLOURS)]
      d.rectangle([x1 * sx, y1 * sy, (x2 + 1) * sx, (y2 + 1) * sy], outline=c)
      d.text((x1 * sx + 2, y1 * sy + 1), f"{tr.track_id}:{categories[tr.category]}", fill=c)
    active = [r for r in rels if r.start <= f < r.end][:max_lines]
    for i, r in enumerate(active):
      s, p, o = r.triplet
      d.text((2, h * scale + 12 * i), f"{s}-{p}-{o} {r.score:.2f}", fill=(255, 255, 255))
    out.append(canvas)
  return out


def write_gif(images, path, fps=6.0):
  """Writes PIL images as a looping GIF (temporary name, then rename)."""
  with io_util.atomic_path(path) as tmp:
    images[0].save(
      tmp, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0, format="GIF"
    )
  return path
