"""Regenerates `dummy_data/` for the three builder configs.

  python -m relations.occlusion.data.occlusion_boundaries.make_dummy_data

Scenes come from the synthetic generator at 32 x 40 (non-square, so a
row/column-major mix-up shows).  Each format's first test image gets planted
pixels whose stored values exercise the conversion to the internal
convention; `KNOWN` lists them and the builder tests check them.
"""

import os
import shutil

import cv2
import numpy as np

from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import realoob_io
from relations.occlusion.data import synthetic as synthetic_occlusion

SIZE = (32, 40)
HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "dummy_data")

# (config, image id, annotator, y, x) -> (stored angle, expected boundary,
# expected internal orientation, expected valid).
KNOWN = {
  ("realoob", "test_00000", 0, 5, 7): (-np.pi, True, np.pi, True),
  ("realoob", "test_00000", 0, 6, 30): (0.0, False, 0.0, False),
  ("piod", "2008_000002", 0, 10, 33): (-np.pi, True, np.pi, True),
  ("piod", "2008_000002", 0, 20, 4): (np.nan, True, 0.0, False),
  ("bsds_ownership", "100007", 1, 9, 31): (-1.25, True, -1.25, True),
  ("bsds_ownership", "100007", 0, 9, 31): (2.5, False, 0.0, False),
}


def _scene(index):
  rng = np.random.default_rng(synthetic_occlusion.scene_seed(7, "train", index))
  return synthetic_occlusion.render_scene(rng, *SIZE)


def _jpg(path, rgb):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  cv2.imwrite(path, np.ascontiguousarray(rgb[..., ::-1]), [cv2.IMWRITE_JPEG_QUALITY, 95])


def _plant(config, image_id, annotator, b, o, v):
  for (c, i, a, y, x), (stored, is_b, _, is_v) in KNOWN.items():
    if (c, i, a) == (config, image_id, annotator):
      b[y, x], o[y, x], v[y, x] = is_b, stored, is_v


def make_realoob(root):
  ids = {
    "train": ["train_00000", "train_00001", "train_00002"],
    "test": ["test_00000", "test_00001"],
  }
  k = 0
  for split, names in ids.items():
    for image_id in names:
      sc = _scene(k)
      k += 1
      b, o, v = sc["boundaries"], sc["orientation"].astype(np.float64), sc["valid"]
      _plant("realoob", image_id, 0, b, o, v)
      synthetic_occlusion._write_image(  # pylint: disable=protected-access
        os.path.join(root, "images", image_id + ".png"), sc["image"]
      )
      realoob_io.write_gt(root, image_id, b, o, v, depth_m=sc["depth"])
    realoob_io.write_split(root, split, names)
  hn = synthetic_occlusion.render_scene(np.random.default_rng(3), *SIZE, hard_negative=True)
  synthetic_occlusion._write_image(  # pylint: disable=protected-access
    os.path.join(root, "hard_negatives", "hardneg_00000.png"), hn["image"]
  )


def make_piod(root):
  train, test = ["2008_000001", "2008_000003", "2008_000004"], ["2008_000002", "2008_000005"]
  for k, image_id in enumerate(sorted(train + test)):
    sc = _scene(10 + k)
    b, o, v = sc["boundaries"], sc["orientation"].astype(np.float64), sc["valid"]
    _plant("piod", image_id, 0, b, o, v)
    ys, xs = np.nonzero(b)
    half = len(ys) // 2  # two fragments, so the cell array has several
    frags = [(ys[:half], xs[:half]), (ys[half:], xs[half:])]
    occlusion_formats.write_piod(os.path.join(root, "Data", image_id + ".mat"), o, frags)
    _jpg(os.path.join(root, "JPEGImages", image_id + ".jpg"), sc["image"])
  with open(os.path.join(root, "val_doc_2010.txt"), "w") as f:
    f.write("".join(i + "\n" for i in test))


def make_bsds(root):
  split = {"trainfg": ["2092", "8049", "12074"], "testfg": ["100007", "105025"]}
  k = 0
  for folder, ids in split.items():
    for image_id in ids:
      sc = _scene(20 + k)
      k += 1
      anns = []
      for a in range(2):  # two annotators; the second drops some pixels
        b = sc["boundaries"].copy()
        if a == 1:
          b[:, : SIZE[1] // 3] = False
        o = np.where(b, sc["orientation"], 0).astype(np.float64)
        v = b.copy()
        _plant("bsds_ownership", image_id, a, b, o, v)
        anns.append((b.astype(np.float64), o))
      occlusion_formats.write_bsds_ownership(os.path.join(root, folder, image_id + ".mat"), anns)
      _jpg(os.path.join(root, "BSDS300", "images", "train", image_id + ".jpg"), sc["image"])


def main():
  for name, fn in (("realoob", make_realoob), ("piod", make_piod), ("bsds_ownership", make_bsds)):
    d = os.path.join(HERE, name)
    shutil.rmtree(d, ignore_errors=True)
    fn(d)
  print(f"wrote {HERE}")


if __name__ == "__main__":
  main()
