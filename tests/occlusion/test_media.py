"""The occlusion evaluator's TensorBoard media: overlays of the first images and the PR curves."""

import numpy as np
import pytest

from relations.occlusion import evaluator
from relations.train import summaries


@pytest.mark.slow  # the metrics' numba kernels and matplotlib: 40 s on a busy 2-core machine
def test_write_and_score_fills_overlays_and_pr_curves(tmp_path):
  rng = np.random.default_rng(0)
  h, w = 20, 24
  source, items = [], []
  for i in range(4):
    b = np.zeros((1, h, w), bool)
    b[0, 5 + i, 3:20] = True
    theta = np.full((1, h, w), 0.5, np.float32)
    image = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    source.append(
      {
        "id": f"im{i}".encode(),
        "image": image,
        "boundaries": b,
        "orientation": theta,
        "valid": np.ones((1, h, w), bool),
      }
    )
    items.append((i, (b[0].astype(np.float32), theta[0])))
  media = {}
  ec = {"nthresh": 5, "num_workers": 1}
  res = evaluator.write_and_score(items, source, str(tmp_path), ec, media=media)
  assert res["B-ODS"] > 0.97 and res["num_images"] == 4.0
  images = media["images"]
  # The first MEDIA_IMAGES overlays, exactly the pictures written to overlay/.
  assert sorted(images) == ["overlay/im0", "overlay/im1", "overlay/im2", "pr_curves"]
  want = evaluator.overlay(source[1]["image"], items[1][1][0], items[1][1][1])
  np.testing.assert_array_equal(images["overlay/im1"], want)
  assert images["pr_curves"].shape == (320, 320, 3) and images["pr_curves"].dtype == np.uint8
  # Without `media` the result is the same and nothing else is returned.
  assert evaluator.write_and_score(items, source, str(tmp_path / "b"), ec) == res
  assert summaries.MEDIA not in res
