"""Shared fixture pairs for the occlusion-evaluation tests."""

import functools

import numpy as np

from relations.occlusion.metrics import synthetic

# (height, width, shapes, quality, noise, kind) - sizes, densities and noise
# vary; "noise" pairs are pure white-noise predictions.
_SPECS = [
  (48, 64, 3, 0.9, 0.1, "scene"),
  (64, 48, 4, 0.6, 0.3, "scene"),
  (80, 80, 5, 0.8, 0.2, "scene"),
  (96, 128, 6, 0.5, 0.4, "scene"),
  (120, 90, 4, 0.95, 0.05, "scene"),
  (128, 160, 8, 0.7, 0.3, "scene"),
  (60, 200, 5, 0.85, 0.15, "scene"),
  (200, 60, 5, 0.75, 0.25, "scene"),
  (144, 144, 10, 0.6, 0.5, "scene"),
  (100, 150, 7, 0.9, 0.6, "scene"),
  (72, 96, 3, 0.4, 0.2, "scene"),
  (160, 120, 9, 0.8, 0.1, "scene"),
  (56, 56, 2, 1.0, 0.0, "scene"),
  (90, 110, 6, 0.65, 0.35, "scene"),
  (110, 140, 7, 0.55, 0.45, "scene"),
  (130, 100, 5, 0.9, 0.3, "scene"),
  (70, 70, 4, 0.7, 0.7, "scene"),
  (150, 180, 10, 0.85, 0.2, "scene"),
  (40, 120, 3, 0.8, 0.1, "scene"),
  (120, 40, 3, 0.8, 0.4, "scene"),
  (64, 64, 0, 0.8, 0.3, "noise"),
  (100, 80, 0, 0.8, 0.1, "noise"),
  (96, 96, 6, 0.8, 0.2, "scene"),
  (84, 132, 8, 0.6, 0.3, "scene"),
  (136, 88, 7, 0.75, 0.25, "scene"),
  (76, 156, 6, 0.85, 0.35, "scene"),
  (176, 128, 9, 0.7, 0.15, "scene"),
  (52, 92, 3, 0.9, 0.5, "scene"),
  (112, 112, 8, 0.5, 0.2, "scene"),
  (88, 64, 4, 0.95, 0.4, "scene"),
  (104, 168, 9, 0.8, 0.3, "scene"),
  (168, 104, 9, 0.6, 0.1, "scene"),
]


@functools.lru_cache(maxsize=None)
def pairs():
  """32 (sample dict, seed) pairs: prob, theta_pred, gts, theta_gts, valids."""
  out = []
  for seed, (h, w, k, q, n, kind) in enumerate(_SPECS):
    rng = np.random.default_rng(1000 + seed)
    gt = synthetic.make_scene(rng, h, w, num_shapes=max(k, 1))
    if kind == "noise":
      prob = rng.random((h, w)).astype(np.float32)
      theta = rng.uniform(-np.pi, np.pi, (h, w)).astype(np.float32)
    else:
      prob, theta = synthetic.make_prediction(rng, gt, quality=q, noise=n)
    out.append(
      dict(
        prob=prob,
        theta_pred=theta,
        gts=[gt["boundaries"]],
        theta_gts=[gt["orientation"]],
        valids=[gt["valid"]],
      )
    )
  return out
