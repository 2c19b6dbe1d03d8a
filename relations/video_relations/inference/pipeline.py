"""Video inference: frames -> detections -> tracks -> segment relations ->
greedy association -> per-video cut (official submission entries).

Two modes (`config.video.tracks`):
- `groundtruth`: the annotated trajectories (boxes on every native frame, the
  annotated categories with probability 1);
- `detected`: the model's detections linked by `tracking.link_detections`,
  interpolated to every native frame (`interpolate`), category = the track's
  most likely class (its probability multiplies the relation score).

Relations are predicted per temporal segment (`segments.segment_video`) for
every ordered pair of tracks visible together in it; each pair contributes
its `predicates_per_pair` most likely predicates, scored
`p(predicate) * p(subject class) * p(object class)`, over the central part
of the segment (`segment_trim` native frames cut at both ends, not at the
video's ends): segment-level durations overshoot short relations, and the
association concatenates the overlapping central parts. After the
association, chained predictions at either end of a relation scoring below
`trim_ratio` x its best are dropped (`association.trim_weak_ends`), then
`extent_shrink` native frames are cut from both ends (`association.shrink`).
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from relations.video_relations.inference import association
from relations.video_relations import boxes as box_lib
from relations.video_relations.inference import interpolate
from relations.video_relations.inference import segments as seg_lib
from relations.video_relations.inference import submission
from relations.video_relations.inference import tracking


@dataclasses.dataclass
class TrackInfo:
  """A trajectory as the relation head and the submission need it.

  `norm_boxes` `[T, 4]` normalised xyxy at every sampled frame (interpolated
  inside the span, held outside), `present` `[T]` sampled frames inside the
  native span `[start, end)`, `native_boxes` `[end - start, 4]` pixel xyxy.
  """

  track_id: int
  category: int
  category_prob: float
  norm_boxes: np.ndarray
  present: np.ndarray
  start: int
  end: int
  native_boxes: np.ndarray


def _norm(b, w, h):
  b = np.asarray(b, np.float64)
  return (b + np.array([0, 0, 1, 1])) / np.array([w, h, w, h])


def groundtruth_tracks(example):
  """`TrackInfo` for every annotated trajectory of a TFDS example."""
  tr = example["tracks"]
  fidx = np.asarray(example["frame_indices"])
  w, h = int(example["width"]), int(example["height"])
  nb = np.asarray(tr["native_boxes"], np.float64)
  npres = np.asarray(tr["native_present"], bool)
  out = []
  for k, cat in enumerate(np.asarray(tr["category"]).tolist()):
    fr = np.flatnonzero(npres[:, k])
    if fr.size == 0:
      continue
    start, end = int(fr[0]), int(fr[-1]) + 1
    native = interpolate.interpolate_boxes(fr, nb[fr, k], start, end)
    # Annotated frames keep their exact boxes; gaps are interpolated.
    sampled = np.stack([np.interp(fidx, fr, nb[fr, k, j]) for j in range(4)], -1)
    out.append(
      TrackInfo(
        k, int(cat), 1.0, _norm(sampled, w, h), (fidx >= start) & (fidx < end), start, end, native
      )
    )
  return out


def own_window(start, end, trim, num_frames):
  """The part `[start + trim, end - trim)` of a segment that its predictions
  claim; not trimmed at the video's first / last frame."""
  return (start + trim if start > 0 else start, end - trim if end < num_frames else end)


def smooth_boxes(boxes, weight):
  """Temporal smoothing of a track's boxes `[n, 4]`.

  Each inner box becomes `(w * prev + box + w * next) / (1 + 2 w)`; the end
  boxes are kept. Per-frame detections jitter by a few pixels while objects
  move smoothly, and vIoU integrates that jitter over the whole relation.
  """
  if weight <= 0 or len(boxes) < 3:
    return boxes
  out = boxes.copy()
  out[1:-1] = (weight * boxes[:-2] + boxes[1:-1] + weight * boxes[2:]) / (1 + 2 * weight)
  return out


def detected_tracks(example, det, tracker_cfg, smoothing=0.0):
  """`TrackInfo` from per-frame detections linked into trajectories.

  Args:
    example: the TFDS example (frame ids, size, frame count).
    det: dict of numpy arrays over sampled frames: `boxes` `[T, Q, 4]`
      normalised cxcywh, `probs` `[T, Q, C + 1]`, `embeddings` `[T, Q, E]`.
    tracker_cfg: `tracking.TrackerConfig`.
    smoothing: neighbour weight of `smooth_boxes` (0 = raw detections).

  Returns:
    (list of `TrackInfo`, list of raw `tracking.Track`).
  """
  fidx = np.asarray(example["frame_indices"])
  w, h = int(example["width"]), int(example["height"])
  n_native = int(example["num_frames"])
  step = int(np.median(np.diff(fidx))) if len(fidx) > 1 else 1
  frames = []
  for t in range(len(fidx)):
    probs = det["probs"][t]
    cls = probs[:, :-1]
    xyxy = box_lib.np_cxcywh_to_xyxy(det["boxes"][t]) * np.array([w, h, w, h])
    xyxy = xyxy - np.array([0, 0, 1, 1])
    frames.append(
      {
        "boxes": xyxy,
        "scores": cls.max(-1),
        "class_probs": cls / np.maximum(cls.sum(-1, keepdims=True), 1e-9),
        "embeddings": det["embeddings"][t],
      }
    )
  raw = tracking.link_detections(frames, tracker_cfg)
  out = []
  for tr in raw:
    f = fidx[np.asarray(tr.frames)]
    bx = smooth_boxes(np.stack(tr.boxes), float(smoothing))
    start, end = interpolate.observed_span(f, step, n_native)
    native = interpolate.interpolate_boxes(f, bx, start, end)
    sampled = np.stack([np.interp(fidx, f, bx[:, j]) for j in range(4)], -1)
    p = tr.category_distribution()
    c = int(np.argmax(p))
    out.append(
      TrackInfo(
        tr.track_id,
        c,
        float(p[c]),
        _norm(sampled, w, h),
        (fidx >= start) & (fidx < end),
        start,
        end,
        native,
      )
    )
  return out, raw


class Predictor:
  """Runs the model on whole videos and produces video-level relations."""

  def __init__(self, model, params, config, categories, predicates, mesh=None):
    """`mesh`: optional local mesh (1 axis) holding `params` replicated; the
    encoder's frame batches are then split over its devices."""
    self.model = model
    self.params = params
    self.config = config
    self.categories = list(categories)
    self.predicates = list(predicates)
    v = config.video
    self.tracker_cfg = tracking.TrackerConfig(**dict(v.tracker))
    encode = lambda p, x: model.apply({"params": p}, x, method=model.encode_detect)
    self._frames_sharding = None
    if mesh is not None and int(v.frame_batch) % mesh.size == 0:
      from jax.sharding import NamedSharding, PartitionSpec as P  # pylint: disable=g-import-not-at-top

      self._frames_sharding = NamedSharding(mesh, P(mesh.axis_names[0]))
    self._encode = jax.jit(encode)
    self._relate = jax.jit(
      lambda p, *a: jax.nn.sigmoid(model.apply({"params": p}, *a, method=model.relate))
    )

  def detect(self, frames):
    """Model frames `[T, H, W, 3]` -> (grid, numpy detections).

    The grid is `[T', h, w, D]` with T' = T rounded up to `frame_batch`;
    detections are numpy arrays over the T real frames.
    """
    fb = int(self.config.video.frame_batch)
    t = len(frames)
    pad = (-t) % fb
    x = (
      np.concatenate([frames, np.zeros((pad, *frames.shape[1:]), frames.dtype)]) if pad else frames
    )
    grids, dets = [], []
    for i in range(0, len(x), fb):
      xb = (
        jnp.asarray(x[i : i + fb])
        if self._frames_sharding is None
        else jax.device_put(x[i : i + fb], self._frames_sharding)
      )
      g, d = self._encode(self.params, xb)
      grids.append(g)
      dets.append(
        {
          "boxes": np.asarray(d["boxes"]),
          "probs": np.asarray(jax.nn.softmax(d["logits"], -1)),
          "embeddings": np.asarray(d["embeddings"]),
        }
      )
    # The grid stays padded to a multiple of `frame_batch` frames: `relate`
    # then compiles once per bucket, not once per video length.
    grid = jnp.concatenate(grids)
    det = {k: np.concatenate([d[k] for d in dets])[:t] for k in dets[0]}
    return grid, det

  def segment_relations(self, example, grid, tracks):
    """Segment-level `association.Relation`s, grouped `[(start, [rel])]`."""
    v = self.config.video
    fidx = np.asarray(example["frame_indices"])
    n_native = int(example["num_frames"])
    seg_len = int(v.segment_length)
    segs = seg_lib.segment_video(0, n_native, seg_len, int(v.segment_stride))
    rows = []  # (segment index, sub track, obj track, frame rows)
    for si, (s, e) in enumerate(segs):
      sel = np.flatnonzero((fidx >= s) & (fidx < e))
      if sel.size == 0:
        continue
      vis = [tr for tr in tracks if tr.present[sel].any()]
      for a in vis:
        for b in vis:
          if a is not b and (a.present[sel] & b.present[sel]).any():
            rows.append((si, a, b, sel))
    if not rows:
      return [(s, []) for s, _ in segs]
    l_max = max(len(r[3]) for r in rows)
    l_max += (-l_max) % 4  # few distinct shapes -> few compilations
    pb = int(v.pair_batch)
    n = len(rows) + (-len(rows)) % pb
    c = len(self.categories)
    fi = np.zeros((n, l_max), np.int32)
    tm = np.zeros((n, l_max), np.float32)
    sb = np.zeros((n, l_max, 4), np.float32)
    ob = np.zeros((n, l_max, 4), np.float32)
    sb[..., 2:] = ob[..., 2:] = 1e-2
    mk = np.zeros((n, l_max), bool)
    sc = np.zeros((n, c), np.float32)
    oc = np.zeros((n, c), np.float32)
    for r, (si, a, b, sel) in enumerate(rows):
      k = len(sel)
      fi[r, :k] = sel
      tm[r, :k] = (fidx[sel] - segs[si][0]) / seg_len
      sb[r, :k] = a.norm_boxes[sel]
      ob[r, :k] = b.norm_boxes[sel]
      mk[r, :k] = a.present[sel] & b.present[sel]
      sc[r, a.category] = 1.0
      oc[r, b.category] = 1.0
    probs = []
    for i in range(0, n, pb):
      sl = slice(i, i + pb)
      probs.append(
        np.asarray(
          self._relate(self.params, grid, fi[sl], tm[sl], sb[sl], ob[sl], mk[sl], sc[sl], oc[sl])
        )
      )
    probs = np.concatenate(probs)[: len(rows)]
    k_top = int(v.predicates_per_pair)
    out = {si: [] for si in range(len(segs))}
    trim = int(v.get("segment_trim", 0))
    for r, (si, a, b, _) in enumerate(rows):
      s, e = segs[si]
      # A segment's prediction claims its central part only (the label rule
      # asks a relation to cover half of the segment), except at the video's
      # ends; overlapping central parts still chain in the association.
      s_own, e_own = own_window(s, e, trim, n_native)
      start = max(s_own, a.start, b.start)
      end = min(e_own, a.end, b.end)
      if end <= start:
        continue
      top = np.argsort(-probs[r], kind="stable")[:k_top]
      for p in top:
        score = float(probs[r, p]) * a.category_prob * b.category_prob
        if score < float(v.min_score):
          continue
        out[si].append(
          association.Relation(
            (self.categories[a.category], self.predicates[p], self.categories[b.category]),
            start,
            end,
            a.native_boxes[start - a.start : end - a.start],
            b.native_boxes[start - b.start : end - b.start],
            [score],
            {"sub_track": a.track_id, "obj_track": b.track_id},
          )
        )
    return [(segs[si][0], out[si]) for si in range(len(segs))]

  def predict_video(self, example, frames, mode, grid_det=None):
    """Video-level relations (cut to the protocol) and diagnostics.

    Args:
      example: TFDS example.
      frames: `[T, H, W, 3]` model frames of its sampled frames.
      mode: "groundtruth" or "detected".
      grid_det: `detect(frames)` if already computed (both modes share it).

    Returns:
      (list of `association.Relation`, dict with `tracks` (TrackInfo),
      `raw_tracks` and `detections` (numpy) for diagnostics).
    """
    v = self.config.video
    grid, det = grid_det if grid_det is not None else self.detect(frames)
    if mode == "groundtruth":
      tracks, raw = groundtruth_tracks(example), None
    elif mode == "detected":
      tracks, raw = detected_tracks(
        example, det, self.tracker_cfg, float(v.get("box_smoothing", 0.0))
      )
    else:
      raise ValueError(f"config.video.tracks: unknown mode {mode!r} (groundtruth, detected)")
    seg_rels = self.segment_relations(example, grid, tracks)
    rels = association.greedy_relational_association(
      seg_rels,
      float(v.association_threshold),
      int(v.topk_per_segment),
      helper_quirk=bool(v.get("helper_confidence_quirk", False)),
    )
    ratio = float(v.get("trim_ratio", 0.0))
    if ratio:
      rels = [association.trim_weak_ends(r, ratio) for r in rels]
    shrink = int(v.get("extent_shrink", 0))
    if shrink:
      rels = [association.shrink(r, shrink, int(example["num_frames"])) for r in rels]
    rels = submission.cut_per_video(rels, v.protocol)
    return rels, {"tracks": tracks, "raw_tracks": raw, "detections": det}
