"""Task glue: video visual relation detection (VidOR / VidVRD) <-> trainer.

Training examples are clips: `config.input.clip_frames` consecutive sampled
frames starting at a random native frame, covering one temporal segment
(`config.video.segment_length` native frames). Targets per clip:
- detection: per frame, the boxes / categories of up to `max_objects` object
  slots (an object keeps its slot across the clip, which also supervises the
  appearance embeddings);
- relations: for every ordered pair of slots that co-occur in the clip, the
  multi-hot predicates whose relation instance covers at least half of the
  shorter of (segment, instance) - the same rule `relation_labels` applies.
The relation head is trained on (slightly jittered) ground-truth boxes in both
modes; `tracks=detected` only changes inference (see `relations.video_relations.inference.pipeline`).

Boxes: the builder stores inclusive pixel corners; normalised boxes are
`(x1 / W, y1 / H, (x2 + 1) / W, (y2 + 1) / H)` (`normalise_boxes`).
"""

import jax
import jax.numpy as jnp
import numpy as np

from relations.train import precision
from relations.video_relations.model import relation_tracker as relation_tracker
from relations.video_relations import boxes as box_lib
from relations.video_relations.model import losses as det_loss


# ---------------------------------------------------------------- data
def builder_class(dataset):
  """The TFDS builder class of `dataset` ("vidor" or "vidvrd")."""
  if dataset == "vidor":
    from relations.video_relations.data.vidor import vidor_dataset_builder as mod  # pylint: disable=g-import-not-at-top
  elif dataset == "vidvrd":
    from relations.video_relations.data.vidvrd import vidvrd_dataset_builder as mod  # pylint: disable=g-import-not-at-top
  else:
    raise ValueError(f"config.dataset: unknown {dataset!r} (vidor, vidvrd)")
  return mod.Builder


def make_builder(config):
  """Builds (if needed) and returns the TFDS builder named by `config.data`."""
  from relations import tfds_util  # pylint: disable=g-import-not-at-top

  return tfds_util.ensure_built(
    builder_class(config.dataset),
    config.data.data_dir,
    config.data.manual_dir or None,
    config=config.data.builder_config,
  )


def make_train_source(config):
  """The training split with frames left encoded (`vrd_video.ClipSource`)."""
  # Data imports (TFDS, PyAV, OpenCV) stay out of the module import: the model and loss run
  # where only the JAX stack is installed (bench/device_check.py on an accelerator host).
  from relations.video_relations.data import video as vrd_video  # pylint: disable=g-import-not-at-top

  return vrd_video.ClipSource(make_builder(config), config.data.train_split)


def normalise_boxes(boxes, width, height):
  """Inclusive pixel xyxy `[..., 4]` -> normalised xyxy in [0, 1]."""
  b = np.asarray(boxes, np.float32)
  scale = np.array([width, height, width, height], np.float32)
  return (b + np.array([0, 0, 1, 1], np.float32)) / scale


def resize_frames(frames, image_size):
  """uint8 `[T, h, w, 3]` (or a list of T frames) -> uint8 `[T, H, W, 3]`."""
  import cv2  # pylint: disable=g-import-not-at-top

  hh, ww = image_size
  out = np.zeros((len(frames), hh, ww, 3), np.uint8)
  for i, f in enumerate(frames):
    f = np.asarray(f)
    out[i] = f if f.shape[:2] == (hh, ww) else cv2.resize(f, (ww, hh), interpolation=cv2.INTER_AREA)
  return out


def normalise_frames(frames):
  """uint8 pixels -> float32 in [-1, 1] (numpy or jax; on device in training)."""
  return frames.astype(jnp.float32) / 127.5 - 1.0


def frames_to_model(frames, image_size):
  """uint8 `[T, h, w, 3]` -> float32 `[T, H, W, 3]` in [-1, 1]."""
  return np.asarray(resize_frames(frames, image_size), np.float32) / 127.5 - 1.0


def _model_frames(batch):
  """The clip batch's uint8 frames normalised on device; padded frames are 0.

  Training batches travel as uint8 (a quarter of the float32 bytes); padding
  frames (`frame_valid` False) are zero after normalisation, as they were when
  the host normalised.
  """
  frames = batch["frames"]
  if frames.dtype != jnp.uint8:
    return frames
  valid = batch["frame_valid"][:, :, None, None, None]
  # XLA multiplies by 1 / 127.5 (255 -> 1.0000001): clip to the host's range.
  return jnp.where(valid, jnp.clip(normalise_frames(frames), -1.0, 1.0), 0.0)


def relation_labels(rel, slot_of, seg_start, seg_end, num_predicates, max_objects):
  """`[S, S, K]` multi-hot predicates of slot pairs in a native segment.

  An instance `[b, e)` counts when it overlaps `[seg_start, seg_end)` by at
  least half of `min(seg_end - seg_start, e - b)` frames.
  """
  out = np.zeros((max_objects, max_objects, num_predicates), np.float32)
  for s, o, p, b, e in zip(
    rel["subject"], rel["object"], rel["predicate"], rel["begin_fid"], rel["end_fid"]
  ):
    if s not in slot_of or o not in slot_of:
      continue
    ov = min(e, seg_end) - max(b, seg_start)
    if ov > 0 and 2 * ov >= min(seg_end - seg_start, e - b):
      out[slot_of[s], slot_of[o], p] = 1.0
  return out


def preprocess_train(example, rng, config):
  """Raw TFDS example -> fixed-shape clip dict (see module docstring)."""
  from relations.video_relations.data import video as vrd_video  # pylint: disable=g-import-not-at-top

  inp, vid = config.input, config.video
  t_clip, m_max, p_max = inp.clip_frames, inp.max_objects, inp.max_pairs
  num_pred = config.model.num_predicates
  fidx = np.asarray(example["frame_indices"])
  n_native = int(example["num_frames"])
  w, h = int(example["width"]), int(example["height"])
  seg = int(vid.segment_length)
  start = int(rng.integers(0, max(n_native - seg, 0) + 1))
  stride = int(inp.get("clip_stride", 1))
  sel = np.flatnonzero((fidx >= start) & (fidx < start + seg))
  # Random phase of the (optional) temporal subsampling inside the segment.
  sel = sel[int(rng.integers(0, stride)) % max(len(sel), 1) :: stride][:t_clip]
  if sel.size == 0:  # segment shorter than the sampling step
    sel = np.array([min(np.searchsorted(fidx, start), len(fidx) - 1)])
  tr = example["tracks"]
  present = np.asarray(tr["present"])[sel]  # [t, K]
  boxes = np.asarray(tr["boxes"], np.float32)[sel]  # [t, K, 4]
  cats = np.asarray(tr["category"], np.int64)
  objs = np.flatnonzero(present.any(0))
  if objs.size > m_max:
    objs = np.sort(rng.choice(objs, m_max, replace=False))
  slot_of = {int(k): i for i, k in enumerate(objs)}
  t = sel.size

  # Only the kept frames are decoded (`ClipSource` leaves them as JPEG bytes).
  stored = example["frames"]
  frames = np.zeros((t_clip, *inp.image_size, 3), np.uint8)
  frames[:t] = resize_frames([vrd_video.decode_frame(stored[i]) for i in sel], inp.image_size)
  frame_valid = np.zeros(t_clip, bool)
  frame_valid[:t] = True
  frame_time = np.zeros(t_clip, np.float32)
  frame_time[:t] = (fidx[sel] - start) / seg
  nb = np.zeros((t_clip, m_max, 4), np.float32)
  nb[:, :, 2:] = 1e-2  # padded slots: harmless non-degenerate boxes
  valid = np.zeros((t_clip, m_max), bool)
  labels = np.zeros(m_max, np.int32)
  for k, i in slot_of.items():
    nb[:t, i] = np.clip(normalise_boxes(boxes[:, k], w, h), 0, 1)
    valid[:t, i] = present[:, k]
    labels[i] = cats[k]
  if rng.random() < float(inp.get("flip_prob", 0.0)):
    # Horizontal flip: every predicate used by VidOR / VidVRD relations here
    # is mirror-invariant except explicit left/right ones (VidVRD), for which
    # the config sets flip_prob = 0.
    frames = np.ascontiguousarray(frames[:, :, ::-1])
    nb = np.stack([1 - nb[..., 2], nb[..., 1], 1 - nb[..., 0], nb[..., 3]], -1)
  # Relation-head inputs: jittered boxes (detections are never exact).
  wh = np.maximum(nb[..., 2:] - nb[..., :2], 1e-3)
  jit = rng.normal(0, inp.box_jitter, nb.shape).astype(np.float32)
  rel_boxes = np.clip(nb + jit * np.concatenate([wh, wh], -1), 0, 1)
  rel_boxes[..., 2:] = np.maximum(rel_boxes[..., 2:], rel_boxes[..., :2] + 1e-3)

  lab = relation_labels(example["relations"], slot_of, start, start + seg, num_pred, m_max)
  co = (valid[:, :, None] & valid[:, None, :]).any(0) & ~np.eye(m_max, dtype=bool)
  cand = np.argwhere(co)
  pos = lab[cand[:, 0], cand[:, 1]].any(-1) if cand.size else np.zeros(0, bool)
  # Keep every positive pair first, then random negatives.
  order = np.concatenate(
    [rng.permutation(np.flatnonzero(pos)), rng.permutation(np.flatnonzero(~pos))]
  ).astype(int)
  cand = cand[order[:p_max]]
  pairs = np.zeros((p_max, 2), np.int32)
  pair_valid = np.zeros(p_max, bool)
  pair_labels = np.zeros((p_max, num_pred), np.float32)
  pairs[: len(cand)] = cand
  pair_valid[: len(cand)] = True
  if len(cand):
    pair_labels[: len(cand)] = lab[cand[:, 0], cand[:, 1]]
  return {
    "frames": frames,
    "frame_valid": frame_valid,
    "frame_time": frame_time,
    "boxes": nb,
    "box_valid": valid,
    "labels": labels,
    "rel_boxes": rel_boxes,
    "pairs": pairs,
    "pair_valid": pair_valid,
    "pair_labels": pair_labels,
  }


# ---------------------------------------------------------------- model
def make_model(config):
  kw = dict(config.model.to_dict())
  variant = kw.pop("vit_variant", None) or None
  kw.pop("backbone", None)
  kw.pop("init_from", None)
  kw["vit"] = {
    "dtype": precision.compute_dtype(config),
    "remat": precision.remat(config),
    **(kw.get("vit") or {}),
  }
  return relation_tracker.Model(vit_variant=variant, **kw)


def _relation_inputs(batch, num_classes):
  """Pair arrays for `RelationTracker.__call__` from a clip batch."""
  rb = batch["rel_boxes"]  # [B, T, M, 4]
  valid = batch["box_valid"]  # [B, T, M]
  s, o = batch["pairs"][..., 0], batch["pairs"][..., 1]  # [B, P]
  # [B, T, P, 4] -> [B, P, T, 4]
  sub_b = jnp.take_along_axis(rb, s[:, None, :, None], axis=2).transpose(0, 2, 1, 3)
  obj_b = jnp.take_along_axis(rb, o[:, None, :, None], axis=2).transpose(0, 2, 1, 3)
  sv = jnp.take_along_axis(valid, s[:, None, :], axis=2).transpose(0, 2, 1)
  ov = jnp.take_along_axis(valid, o[:, None, :], axis=2).transpose(0, 2, 1)
  mask = sv & ov & batch["pair_valid"][..., None]
  b, p = s.shape
  t = rb.shape[1]
  frame_idx = jnp.broadcast_to(jnp.arange(t), (b, p, t))
  times = jnp.broadcast_to(batch["frame_time"][:, None, :], (b, p, t))
  lab = batch["labels"]
  sub_cat = jax.nn.one_hot(jnp.take_along_axis(lab, s, 1), num_classes)
  obj_cat = jax.nn.one_hot(jnp.take_along_axis(lab, o, 1), num_classes)
  return frame_idx, times, sub_b, obj_b, mask, sub_cat, obj_cat


def init_params(model, batch, rng):
  args = _relation_inputs(jax.tree.map(jnp.asarray, batch), model.num_classes)
  batch = jax.tree.map(jnp.asarray, batch)
  return model.init(rng, _model_frames(batch), *args)["params"]


def load_pretrained(config, params):
  """Imports `config.model.init_from` (big_vision .npz or HF ViT / DINOv2 / CLIP) into the frame
  encoder; warns when a config naming a pretrained `model.backbone` has none."""
  from relations.nn import vit_import  # pylint: disable=g-import-not-at-top

  return vit_import.load_backbone(config.model, params, ("encoder",))


def loss_fn(model, params, batch, rng, config):
  lc = config.loss
  args = _relation_inputs(batch, model.num_classes)
  rel_logits, det = model.apply(
    {"params": params}, _model_frames(batch), *args, train=True, rngs={"dropout": rng}
  )
  b, t, m = batch["box_valid"].shape
  tgt_boxes = box_lib.xyxy_to_cxcywh(batch["boxes"]).reshape(b * t, m, 4)
  tgt_labels = jnp.broadcast_to(batch["labels"][:, None], (b, t, m)).reshape(b * t, m)
  tgt_valid = (batch["box_valid"] & batch["frame_valid"][..., None]).reshape(b * t, m)
  kw = dict(eos_coef=lc.eos_coef, w_class=lc.w_class, w_l1=lc.w_l1, w_giou=lc.w_giou)
  l_det, m_det, match = det_loss.detection_loss(
    det["logits"], det["boxes"], tgt_labels, tgt_boxes, tgt_valid, **kw
  )
  l_aux = 0.0
  for logits, boxes in det["aux"]:
    l_aux += det_loss.detection_loss(logits, boxes, tgt_labels, tgt_boxes, tgt_valid, **kw)[0]
  q = det["embeddings"].shape[1]
  l_emb = det_loss.embedding_loss(
    det["embeddings"].reshape(b, t, q, -1),
    match.reshape(b, t, m),
    tgt_valid.reshape(b, t, m),
    jnp.arange(m),
  )
  pair_ok = batch["pair_valid"] & args[4].any(-1)
  l_rel = det_loss.predicate_loss(rel_logits, batch["pair_labels"], pair_ok, gamma=lc.focal_gamma)
  loss = lc.det * l_det + lc.aux * l_aux + lc.emb * l_emb + lc.rel * l_rel
  metrics = {
    "det_loss": l_det,
    "det_class": m_det["class"],
    "det_l1": m_det["l1"],
    "det_giou": m_det["giou"],
    "aux_loss": l_aux,
    "emb_loss": l_emb,
    "rel_loss": l_rel,
  }
  return loss, metrics
