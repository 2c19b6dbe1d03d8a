"""Training-time evaluator: predict a split, write the prediction layout, score.

  config.evals.test = dict(type="occlusion", every_steps=0,
                           split="test", max_images=0, protocol="doob",
                           valid_only=True, border=2, nthresh=99,
                           matcher="exact", bsds_seed=0)

`matcher="bsds"` scores with the BSDS matcher (pyEdgeEval, an optional
extra; see relations/occlusion/README.md "Which matcher"); the evaluator
checks that it is installed when it is built, not at the first evaluation.

Per test image (native resolution: padded to the patch grid, cropped back)
it writes under `<workdir>/step_<N>/`:

  boundaries/<id>.png    uint16, boundary probability = v / 65535
  orientation/<id>.png   uint16, theta = v / 65535 * 2*pi - pi (radians)
  overlay/<id>.png       RGB: boundary coloured by orientation (hue) over the
                         image, like RealOOB's Figure 1

which `python -m relations.evaluate occlusion` reads directly, then scores
the files it wrote (read back, so the scores are those of the files) with
`relations.occlusion.metrics.api.evaluate_arrays` against the builder's
ground truth (every annotator).  Returns B-ODS, B-OIS, B-AP, O-ODS, O-OIS,
O-AP and AC.
"""

import os

import cv2
import jax
import jax.numpy as jnp
import numpy as np

from relations import io_util
from relations.occlusion.data import preprocess as occlusion_pp
from relations.occlusion.data import realoob_io
from relations.train import eval_loop, summaries

HEADLINE = ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP", "AC")


def overlay(image, prob, theta):
  """RGB uint8 [H, W, 3]: hue = orientation, opacity = probability."""
  hsv = np.zeros(prob.shape + (3,), np.uint8)
  hsv[..., 0] = np.round((np.mod(theta + np.pi, 2 * np.pi)) / (2 * np.pi) * 179).astype(np.uint8)
  hsv[..., 1] = 255
  hsv[..., 2] = 255
  color = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB).astype(np.float32)
  a = np.clip(prob, 0, 1)[..., None]
  base = image.astype(np.float32) * 0.6  # dimmed so the boundaries stand out
  return np.clip(base * (1 - a) + color * a, 0, 255).astype(np.uint8)


def _write_rgb(path, rgb):
  ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
  if not ok:
    raise OSError(f"{path}: PNG encoding failed")
  io_util.write_bytes_atomic(path, buf.tobytes())


MEDIA_IMAGES = 3  # overlays sent to TensorBoard per evaluation (the first images)


def write_and_score(items, source, outdir, eval_config, with_orientation=True, media=None):
  """Writes the prediction layout of `items` once and scores the files it wrote.

  Args:
    items: [(source index, (prob float [H, W] in [0, 1], theta float [H, W]
      radians))] at native resolution, in index order.
    source: random-access builder split (examples with "id", "image",
      "boundaries"/"orientation"/"valid" [A, H, W]).
    outdir: the prediction root (created).
    eval_config: fields protocol, valid_only, border, nthresh, num_workers, matcher,
      bsds_seed (see the module docstring).
    with_orientation: the model predicts orientation; False (config
      `orient=false`): no orientation/ is written and the O-metrics are not
      scored (absent from the result; an angle of 0 would be meaningless).
    media: a dict to fill with TensorBoard pictures (`relations.train.summaries`): "images" ->
      {"overlay/<id>": the first MEDIA_IMAGES overlays, "pr_curves": the B- and O- curves}.

  Returns:
    dict of the HEADLINE metrics (floats; O-* only with orientation) plus
    "num_images".
  """
  from relations.occlusion.metrics import api  # pylint: disable=g-import-not-at-top

  samples = []
  images = {}
  for i, (prob, theta) in items:
    ex = source[i]
    image_id = io_util.as_str(ex["id"])
    realoob_io.write_prediction(outdir, image_id, prob, theta if with_orientation else None)
    rgb = overlay(np.asarray(ex["image"]), prob, theta if with_orientation else np.zeros_like(prob))
    _write_rgb(os.path.join(outdir, "overlay", image_id + ".png"), rgb)
    if len(images) < MEDIA_IMAGES:
      images[f"overlay/{image_id}"] = rgb
    pr = realoob_io.read_prediction(outdir, image_id, with_orientation)
    samples.append(
      {
        "id": image_id,
        "prob": pr["boundaries"],
        "theta_pred": pr.get("orientation"),
        "gts": list(np.asarray(ex["boundaries"], bool)),
        "theta_gts": list(np.asarray(ex["orientation"], np.float32)),
        "valids": list(np.asarray(ex["valid"], bool)),
      }
    )
  res = api.evaluate_arrays(
    samples,
    protocol=eval_config.get("protocol", "doob"),
    valid_only=bool(eval_config.get("valid_only", True)),
    border=int(eval_config.get("border", 2)),
    nthresh=int(eval_config.get("nthresh", 99)),
    num_workers=int(eval_config.get("num_workers", 0)) or None,
    matcher=eval_config.get("matcher", "exact"),
    bsds_seed=int(eval_config.get("bsds_seed", 0)),
    with_orientation=with_orientation,
  )
  out = {k: float(res[k]) for k in HEADLINE if res[k] is not None}
  out["num_images"] = float(len(samples))
  if media is not None:
    names = [("boundary", "B")] + ([(res["o_curve"], "O")] if res.get("o_curve") else [])
    curves = {
      f"{short} (AP {res['curves'][c]['AP']:.3f})": (res["curves"][c]["R"], res["curves"][c]["P"])
      for c, short in names
    }
    images["pr_curves"] = summaries.pr_curve_image(curves, f"{len(samples)} images")
    media.setdefault("images", {}).update(images)
  return out


def num_images(source, eval_config) -> int:
  """Images evaluated: the split, or its first `max_images` (> 0)."""
  n = len(source)
  if eval_config.get("max_images", 0):
    n = min(n, int(eval_config.max_images))
  return n


def predict_and_score(predict, source, outdir, eval_config, write=True, with_orientation=True):
  """Runs `predict` image by image in this process, writes the layout, scores it.

  For oracles and the demo; training and `relations.predict` use the sharded
  `Evaluator.run`.

  Args:
    predict: fn(image uint8 [H, W, 3]) -> (prob float [H, W] in [0, 1],
      theta float [H, W] radians).
    source: random-access builder split.
    outdir: the prediction root (created).
    eval_config: see `write_and_score`, plus max_images.
    write: write and score (False: predict only).
    with_orientation: see `write_and_score`.

  Returns:
    dict of the HEADLINE metrics (floats) plus "num_images"; {} if not write.
  """
  items = []
  for i in range(num_images(source, eval_config)):
    items.append((i, predict(np.asarray(source[i]["image"]))))
  if not write:
    return {}
  return write_and_score(items, source, outdir, eval_config, with_orientation)


class Evaluator:
  """See the module docstring; constructed by the trainer."""

  def __init__(self, model, config, eval_config, workdir):
    from relations.occlusion import task as occlusion  # pylint: disable=g-import-not-at-top
    from relations.occlusion.metrics import api  # pylint: disable=g-import-not-at-top

    # Fail at start-up, not hours later at the first evaluation.
    api.check_matcher(eval_config.get("matcher", "exact"), int(eval_config.get("bsds_seed", 0)))
    self.model, self.config, self.eval_config = model, config, eval_config
    self.workdir = workdir
    # orient=false models have no orientation output: B-metrics only.
    self.with_orientation = bool(config.model.get("orientation", True))
    self.source = occlusion.make_builder(config).as_data_source(eval_config.split)
    vit_kw = dict(config.model.get("vit") or {})
    if config.model.get("vit_variant"):
      from relations.nn import vit  # pylint: disable=g-import-not-at-top

      vit_kw = {**vit.decode_variant(config.model.vit_variant), **vit_kw}
    self.patch = int(vit_kw.get("patch_size", 16))

    def fwd(params, batch):
      out = model.apply({"params": params}, batch["image"], train=False)
      prob = jax.nn.sigmoid(out["boundary_logits"])
      theta = out.get("orientation", jnp.zeros_like(prob))
      return prob, theta

    # Replicated params, batch split over the local devices; retraces once
    # per padded image size.
    self._fwd = eval_loop.jit_predict(fwd)

  def run(self, params, step):
    """Predicts the split with `params`; returns the scores of step `step`.

    Sharded (`relations.train.eval_loop`): each process predicts its images
    on its local devices (images batched with others of the same padded
    size, `eval_config.batch_size` per process, default one per device);
    process 0 writes the prediction layout once and scores it; every process
    returns the same metrics.
    """
    outdir = os.path.join(self.workdir, f"step_{int(step)}")
    mesh = eval_loop.local_mesh()
    local = eval_loop.localize(params, mesh)

    def load(i):
      x = np.asarray(self.source[i]["image"]).astype(np.float32) / 127.5 - 1.0
      padded, hw = occlusion_pp.pad_to_multiple(x, self.patch)
      return {"image": padded, "hw": np.asarray(hw, np.int32)}

    def predict(batch):
      prob, theta = self._fwd(local, batch)
      return prob, theta, batch["hw"]

    def emit(i, out):
      del i
      prob, theta, hw = out
      return (occlusion_pp.crop_back(prob, hw), occlusion_pp.crop_back(theta, hw))

    items = eval_loop.predict_shard(
      num_images(self.source, self.eval_config),
      load,
      predict,
      int(self.eval_config.get("batch_size", 1)),
      emit,
      bucket=lambda i, ex: ex["image"].shape,
      mesh=mesh,
    )

    def finalize(all_items):
      media = {}
      out = write_and_score(
        all_items, self.source, outdir, self.eval_config, self.with_orientation, media
      )
      return {**out, summaries.MEDIA: media}

    return eval_loop.finish(
      items,
      finalize,
      shard_dir=eval_loop.shard_dir(self.workdir),
    )
