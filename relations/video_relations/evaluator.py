"""Training-time evaluator of the relation tracker (`type="video_relations"`).

Runs the whole inference pipeline (`relations.video_relations.pipeline`) on a split,
writes the official submission JSON per mode to
`<workdir>/submission_<mode>_step<N>.json` (temp + rename), validates it with
the submission validator and scores it with the exact evaluator
(`relations.video_relations.metrics.scoring`, `config.video.protocol`). The detected
mode also reports detection AP@0.5 and CLEAR-MOT (MOTA, ID switches) on the
sampled frames, and the prior-only baseline can be scored alongside
(`eval_config.prior=True`).

Config (`config.evals.<name>`): `split`, `groundtruth` (annotation folder or
GT JSON; default `<manual_dir>/annotation/<split folder>`), `max_videos` (0 =
all), `prior` (bool), `gifs` (number of videos drawn as GIFs, per mode).
"""

import os

import jax
import numpy as np

from relations import io_util
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import cli as vrd_cli
from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import io as vrd_io
from relations.video_relations import task as video_relations
from relations.video_relations.metrics import detection as video_metrics
from relations.video_relations import pipeline
from relations.video_relations import prior_baseline
from relations.video_relations import submission
from relations.video_relations import visualize
from relations.train import eval_loop

# Where the official annotation of a split lives below manual_dir.
_SPLIT_FOLDERS = {
  "vidor": {"train": "annotation/training", "validation": "annotation/validation"},
  "vidvrd": {"train": "train", "test": "test"},
}


def names(dataset):
  """(categories, predicates) of a dataset."""
  if dataset == "vidor":
    return (vrd_categories.VIDOR_OBJECT_CATEGORIES, vrd_categories.VIDOR_PREDICATES)
  return (vrd_categories.VIDVRD_OBJECT_CATEGORIES, vrd_categories.VIDVRD_PREDICATES)


def detection_frames(example, det):
  """Per-frame dicts for `metrics.detection_ap` (pixel boxes)."""
  tr = example["tracks"]
  w, h = int(example["width"]), int(example["height"])
  scale = np.array([w, h, w, h])
  cats = np.asarray(tr["category"])
  out = []
  for t in range(len(example["frame_indices"])):
    pres = np.asarray(tr["present"][t], bool)
    probs = det["probs"][t][:, :-1]
    xyxy = pipeline.box_lib.np_cxcywh_to_xyxy(det["boxes"][t]) * scale
    out.append(
      {
        "gt_boxes": np.asarray(tr["boxes"][t])[pres] + np.array([0, 0, 1, 1]),
        "gt_labels": cats[pres],
        "pred_boxes": xyxy,
        "pred_labels": probs.argmax(-1),
        "pred_scores": probs.max(-1),
      }
    )
  return out


def mot_frames(example, raw_tracks):
  """Per-frame dicts for `metrics.clear_mot` (observed track boxes only)."""
  tr = example["tracks"]
  tids = np.asarray(tr["tid"])
  obs = {}
  for track in raw_tracks:
    for f, b in zip(track.frames, track.boxes):
      obs.setdefault(f, []).append((track.track_id, b))
  out = []
  for t in range(len(example["frame_indices"])):
    pres = np.asarray(tr["present"][t], bool)
    hyp = obs.get(t, [])
    out.append(
      {
        "gt_ids": tids[pres],
        "gt_boxes": np.asarray(tr["boxes"][t])[pres],
        "track_ids": np.array([i for i, _ in hyp], int),
        "track_boxes": np.array([b for _, b in hyp]).reshape(-1, 4),
      }
    )
  return out


def score_submission(path, gt, protocol, dataset):
  """Validates and scores a written submission as `relations.evaluate` does; returns the metrics.

  `gt`: `RelationTable` of the evaluated videos. The file is read in one streaming pass into
  columns (`metrics.cli.score_file`): a VidOR-validation-size submission in seconds, not as a
  Python object tree.
  """
  report, res = vrd_cli.score_file(path, gt, protocol, dataset)
  if not report.ok:
    raise ValueError(f"{path}: submission fails validation:\n{report.summary()}")
  out = res.as_dict()
  out["validator_warnings"] = float(len(report.warnings))
  return out


class Evaluator:
  """See module docstring."""

  def __init__(self, model, config, eval_config, workdir):
    self.model = model
    self.config = config
    self.ec = eval_config
    self.workdir = workdir
    self.categories, self.predicates = names(config.dataset)

  def _groundtruth(self, video_ids):
    path = self.ec.get("groundtruth") or os.path.join(
      self.config.data.manual_dir, _SPLIT_FOLDERS[self.config.dataset][self.ec.split]
    )
    gt = vrd_io.read_groundtruth_table(path, self.config.dataset)
    index = {v: j for j, v in enumerate(gt.video_ids)}
    missing = [v for v in video_ids if v not in index]
    if missing:
      raise ValueError(
        f"{path}: no ground truth for videos {missing[:5]} of split {self.ec.split!r}"
      )
    # Only the evaluated videos count (a GT video without predictions would
    # score AP 0).
    return fastjson.concat_tables([gt], {v: (0, index[v]) for v in video_ids})

  def modes(self):
    t = self.config.video.tracks
    return ["groundtruth", "detected"] if t == "both" else [t]

  def run(self, params, step):
    """Predicts, writes, validates and scores; returns `{metric: float}`.

    Sharded (`relations.train.eval_loop`): process p runs the pipeline on
    videos p, p + P, ... with the parameters replicated on its local devices
    (the per-frame encoder's frame batches split over them); process 0
    gathers the relations, writes each submission once, validates and scores
    it; every process returns the same metrics.
    """
    mesh = eval_loop.local_mesh()
    local = eval_loop.localize(params, mesh)
    builder = video_relations.make_builder(self.config)
    ds = builder.as_data_source(self.ec.split)
    n = len(ds) if not self.ec.get("max_videos") else min(len(ds), int(self.ec.max_videos))
    predictor = pipeline.Predictor(
      self.model, local, self.config, self.categories, self.predicates, mesh=mesh
    )
    modes = self.modes()
    n_gif = int(self.ec.get("gifs", 0))
    with jax.set_mesh(mesh):  # the local mesh, not the training one
      items = self._predict_shard(predictor, ds, n, modes, n_gif)

    def finalize(gathered):
      return self._write_and_score([it for _, it in gathered], modes, ds, n, step)

    return eval_loop.finish(items, finalize)

  def _predict_shard(self, predictor, ds, n, modes, n_gif):
    """[(video index, item)] for this process's videos (see `run`)."""
    items = []
    for i in eval_loop.shard_indices(n):
      ex = ds[i]
      vid = io_util.as_str(ex["video_id"])
      raw_frames = np.asarray(ex["frames"])
      frames = video_relations.frames_to_model(raw_frames, self.config.input.image_size)
      grid_det = predictor.detect(frames)
      item = {"video_id": vid, "rels": {}, "det_frames": [], "mot": [], "gifs": {}}
      for m in modes:
        rels, diag = predictor.predict_video(ex, frames, m, grid_det)
        item["rels"][m] = rels
        if m == "detected":
          item["det_frames"] = detection_frames(ex, diag["detections"])
          item["mot"] = mot_frames(ex, diag["raw_tracks"])
        if i < n_gif:
          item["gifs"][m] = visualize.draw_frames(
            raw_frames,
            ex["frame_indices"],
            int(ex["width"]),
            int(ex["height"]),
            diag["tracks"],
            self.categories,
            rels,
          )
      items.append((i, item))
    return items

  def _write_and_score(self, items, modes, ds, n, step):
    """Process 0: GIFs, one submission per mode, validation, scores."""
    results = {m: {} for m in modes}
    det_frames, mot = [], []
    for item in items:
      for m in modes:
        results[m][item["video_id"]] = item["rels"][m]
      det_frames += item["det_frames"]
      mot += item["mot"]
      for m, imgs in item["gifs"].items():
        visualize.write_gif(imgs, os.path.join(self.workdir, f"gif_{m}", f"{item['video_id']}.gif"))
    gt = self._groundtruth(list(results[modes[0]].keys()))
    out = {}
    protocol = self.config.video.protocol
    for m in modes:
      path = os.path.join(self.workdir, f"submission_{m}_step{step}.json")
      submission.write_submission(results[m], path)
      for k, v in score_submission(path, gt, protocol, self.config.dataset).items():
        out[f"{m}/{k}"] = v
    if "detected" in modes:
      out["detected/AP50"] = video_metrics.detection_ap(det_frames)["AP50"]
      mm = video_metrics.clear_mot(mot)
      out.update({f"detected/{k}": float(mm[k]) for k in ("MOTA", "IDSW", "FP", "FN", "num_gt")})
    if self.ec.get("prior"):
      out.update({f"prior/{k}": v for k, v in self.prior(ds, n, gt, step).items()})
    return out

  def prior(self, ds, n, gt, step):
    """Scores the prior-only baseline on the same videos and protocol."""
    train = video_relations.make_builder(self.config).as_data_source(self.config.data.train_split)
    counts = prior_baseline.triplet_counts(
      (train[i] for i in range(len(train))), self.categories, self.predicates
    )
    res = {}
    k = int(self.config.video.predicates_per_pair)
    for i in range(n):
      ex = ds[i]
      res[io_util.as_str(ex["video_id"])] = submission.cut_per_video(
        prior_baseline.predict_video(ex, counts, self.categories, k), self.config.video.protocol
      )
    path = os.path.join(self.workdir, f"submission_prior_step{step}.json")
    submission.write_submission(res, path)
    return score_submission(path, gt, self.config.video.protocol, self.config.dataset)
