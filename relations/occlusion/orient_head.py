"""RealOOB's "edge detector + orientation head" protocol (Table 3, middle group).

RealOOB adapts edge detectors with "a lightweight orientation head inspired
by OPNet: the boundary branch keeps its native architecture and edge loss,
while the added head predicts occlusion orientation from multi-level
features and is supervised with the OPNet orientation loss".  Here:

* `OrientationHead`: multi-level backbone features [B, h_i, w_i, C_i] are
  each projected (1x1) and resized bilinearly to full resolution, summed
  with a full-resolution conv path on the image (OPNet's orientation path
  also reads the image at stride 1), then two 3x3 convs and a 1x1 conv give
  a 2-vector (cos, sin) per pixel.
* `opnet_orientation_loss` (losses.py): OPNet's orthogonal-orientation loss.
* Backbones (`edge_detector` in the config): the project's ViT boundary
  model (`model.OcclusionViT` with its own orientation output off and
  `feature_blocks` exposing encoder blocks), or `ConvEdgeDetector`, a small
  HED-style conv edge detector (4 stages, deep supervision fused by a 1x1
  conv), so "edge detector + orientation head" is a real row of the table.

  model = HeadedModel(edge=ConvEdgeDetector(), head=OrientationHead())
  out = model.apply({"params": p}, images)   # the keys of model.OcclusionViT
"""

from typing import Any, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp


def _resize(x, h, w):
  return jax.image.resize(x, (x.shape[0], h, w, x.shape[-1]), "bilinear")


class ConvEdgeDetector(nn.Module):
  """A small HED-style edge detector: [B, H, W, 3] -> boundary logits + features.

  Stages of two 3x3 convs (ReLU), 2x2 max-pool between stages; every stage
  emits a side logit (1x1 conv, resized to full resolution) and a 1x1 conv
  fuses them (HED).  H and W must be multiples of 2^(stages - 1).

  Returns:
    dict "boundary_logits" [B, H, W] (the fused logit) and "features": the
    stage outputs from the second on (strides 2, 4, 8, ...).
  """

  channels: Sequence[int] = (16, 32, 64, 128)
  prior_logit: float = -4.0

  @nn.compact
  def __call__(self, images, train: bool = False):
    del train
    _, h, w, _ = images.shape
    x, sides, feats = images, [], []
    for i, c in enumerate(self.channels):
      if i:
        x = nn.max_pool(x, (2, 2), (2, 2))
      x = nn.relu(nn.Conv(c, (3, 3), name=f"stage{i}_conv0")(x))
      x = nn.relu(nn.Conv(c, (3, 3), name=f"stage{i}_conv1")(x))
      sides.append(_resize(nn.Conv(1, (1, 1), name=f"side{i}")(x), h, w))
      if i:
        feats.append(x)
    fused = nn.Conv(1, (1, 1), bias_init=nn.initializers.constant(self.prior_logit), name="fuse")(
      jnp.concatenate(sides, -1)
    )
    return {"boundary_logits": fused[..., 0], "features": feats}


class OrientationHead(nn.Module):
  """Multi-level features + image -> (cos, sin) [B, H, W, 2] (see the module docstring)."""

  dim: int = 32
  image_channels: int = 16

  @nn.compact
  def __call__(self, features, images):
    _, h, w, _ = images.shape
    x = nn.relu(nn.Conv(self.image_channels, (3, 3), name="image0")(images))
    x = nn.Conv(self.dim, (3, 3), name="image1")(x)
    for i, f in enumerate(features):
      x = x + _resize(nn.Conv(self.dim, (1, 1), name=f"level{i}")(f), h, w)
    x = nn.relu(nn.Conv(self.dim, (3, 3), name="conv0")(nn.relu(x)))
    x = nn.relu(nn.Conv(self.dim, (3, 3), name="conv1")(x))
    return nn.Conv(2, (1, 1), name="out")(x)


class HeadlessEdge(nn.Module):
  """An edge detector alone (boundary only): drops its "features"."""

  edge: Any

  def __call__(self, images, train: bool = False):
    out = dict(self.edge(images, train=train))
    out.pop("features", None)
    return out


class HeadedModel(nn.Module):
  """An edge detector (boundary branch, its own loss) + the orientation head.

  `edge` returns "boundary_logits" and "features" (multi-level); the output
  has the keys of `model.OcclusionViT`: boundary_logits, orientation_vec
  (cos, sin) and orientation (radians).
  """

  edge: Any
  head: Any

  def __call__(self, images, train: bool = False):
    out = dict(self.edge(images, train=train))
    feats = out.pop("features")
    vec = self.head(feats, images)
    out["orientation_vec"] = vec
    out["orientation"] = jnp.arctan2(vec[..., 1], vec[..., 0])
    return out
