"""Relation tracker: ViT frame encoder + set-prediction detector + relation head.

One linen module with three entry points (all pure, jittable):
- `encode_detect(frames)`: frames `[N, H, W, 3]` in [-1, 1] -> patch grid
  `[N, h, w, D]` and detections (`detection_head.DetectionHead`);
- `relate(grid, frame_idx, sub_boxes, obj_boxes, mask, sub_cat, obj_cat)`:
  predicate logits for trajectory pairs over a segment
  (`relation_head.RelationHead`);
- `__call__(frames, pairs...)`: both, for a batch of clips (training).

Tracking, association and submission writing run on the host
(`relations.video_relations.inference`); the task glue is `relations.video_relations.task`.
Cost per step and training-time estimates: `relations/video_relations/README.md`.
"""

import flax.linen as nn
import jax.numpy as jnp

from relations.video_relations.model import detection_head
from relations.video_relations.model import relation_head
from relations.nn import vit


class RelationTracker(nn.Module):
  """See module docstring. `vit_kw` are passed to `vit.Model`."""

  num_classes: int
  num_predicates: int
  vit_kw: dict
  num_queries: int = 16
  det_layers: int = 2
  det_heads: int = 2
  det_mlp_dim: int = 128
  emb_dim: int = 32
  rel_hidden: int = 128
  roi_size: int = 2
  roi_samples: int = 2
  use_motion: bool = True
  refine_size: int = 0
  refine_iters: int = 1

  def setup(self):
    self.encoder = vit.Model(**self.vit_kw)
    self.detector = detection_head.DetectionHead(
      num_classes=self.num_classes,
      num_queries=self.num_queries,
      num_layers=self.det_layers,
      num_heads=self.det_heads,
      mlp_dim=self.det_mlp_dim,
      emb_dim=self.emb_dim,
      refine_size=self.refine_size,
      refine_iters=self.refine_iters,
    )
    self.relation = relation_head.RelationHead(
      num_predicates=self.num_predicates,
      hidden=self.rel_hidden,
      roi_size=self.roi_size,
      roi_samples=self.roi_samples,
      use_motion=self.use_motion,
    )

  def encode_detect(self, frames, train=False):
    """`[N, H, W, 3]` -> (`[N, h, w, D]` patch grid, detection dict)."""
    _, out = self.encoder(frames, train=train)
    # The ViT runs in its compute dtype (bfloat16 on accelerators); the detection and relation
    # heads are small and keep box regression, matching costs and RoI sampling in float32.
    grid = out["patch_grid"].astype(jnp.float32)
    return grid, self.detector(grid, frames)

  def relate(self, grid, frame_idx, times, sub_boxes, obj_boxes, mask, sub_cat, obj_cat):
    """Predicate logits `[P, num_predicates]`; see `RelationHead`."""
    return self.relation(grid, frame_idx, times, sub_boxes, obj_boxes, mask, sub_cat, obj_cat)

  def __call__(
    self, frames, frame_idx, times, sub_boxes, obj_boxes, mask, sub_cat, obj_cat, train=False
  ):
    """Training forward pass on a batch of clips.

    Args:
      frames: `[B, T, H, W, 3]`.
      frame_idx: `[B, P, L]` rows into each clip's T frames.
      times: `[B, P, L]` frame times in units of the segment length.
      sub_boxes, obj_boxes: `[B, P, L, 4]` normalised xyxy.
      mask: `[B, P, L]`; sub_cat, obj_cat: `[B, P, C]`.
      train: dropout switch of the encoder.

    Returns:
      `(predicate_logits [B, P, K], detections)` where every detection array
      has leading dims `[B * T]`.
    """
    b, t = frames.shape[:2]
    grid, det = self.encode_detect(frames.reshape(b * t, *frames.shape[2:]), train=train)
    grid = grid.reshape(b, t, *grid.shape[1:])
    logits = nn.vmap(
      lambda mdl, *a: mdl(*a),
      variable_axes={"params": None},
      split_rngs={"params": False},
      in_axes=0,
    )(self.relation, grid, frame_idx, times, sub_boxes, obj_boxes, mask, sub_cat, obj_cat)
    return logits, det


def Model(*, num_classes, num_predicates, vit_variant=None, vit=None, **kw):  # pylint: disable=invalid-name,redefined-outer-name
  """Factory: `Model(num_classes=80, num_predicates=50, vit_variant="B/16")`.

  `vit` is a dict of explicit `vit.Model` kwargs overriding the variant.
  """
  vit_kw = dict(vit or {})
  if vit_variant:
    vit_kw["variant"] = vit_variant
  return RelationTracker(
    num_classes=num_classes, num_predicates=num_predicates, vit_kw=vit_kw, **kw
  )
