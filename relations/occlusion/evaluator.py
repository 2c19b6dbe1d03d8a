# Copyright 2025 The relations Authors.
# SPDX-License-Identifier: Apache-2.0
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

from relations.occlusion.data import preprocess as occlusion_pp
from relations.occlusion.data import realoob_io

HEADLINE = ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP", "AC")


def overlay(image, prob, theta):
  """RGB uint8 [H, W, 3]: hue = orientation, opacity = probability."""
  hsv = np.zeros(prob.shape + (3,), np.uint8)
  hsv[..., 0] = np.round((np.mod(theta + np.pi, 2 * np.pi)) / (2 * np.pi)
                         * 179).astype(np.uint8)
  hsv[..., 1] = 255
  hsv[..., 2] = 255
  color = cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB).astype(np.float32)
  a = np.clip(prob, 0, 1)[..., None]
  base = image.astype(np.float32) * 0.6  # dimmed so the boundaries stand out
  return np.clip(base * (1 - a) + color * a, 0, 255).astype(np.uint8)


def _write_rgb(path, rgb):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  ok, buf = cv2.imencode(".png", np.ascontiguousarray(rgb[..., ::-1]))
  if not ok:
    raise OSError(f"{path}: PNG encoding failed")
  tmp = path + ".tmp"
  with open(tmp, "wb") as f:
    f.write(buf.tobytes())
  os.replace(tmp, path)


def _text(v):
  return v.decode() if isinstance(v, bytes) else str(v)


def predict_and_score(predict, source, outdir, eval_config, write=True):
  """Runs `predict` over `source`, writes the prediction layout, scores it.

  Args:
    predict: fn(image uint8 [H, W, 3]) -> (prob float [H, W] in [0, 1],
      theta float [H, W] radians).
    source: random-access builder split (examples with "id", "image",
      "boundaries"/"orientation"/"valid" [A, H, W]).
    outdir: the prediction root (created).
    eval_config: fields split, max_images, protocol, valid_only, border,
      nthresh, matcher, bsds_seed (see the module docstring).
    write: write and score (False on non-lead processes: predict only).

  Returns:
    dict of the HEADLINE metrics (floats) plus "num_images".
  """
  from relations.occlusion.metrics import api# pylint: disable=g-import-not-at-top
  n = len(source)
  if eval_config.get("max_images", 0):
    n = min(n, int(eval_config.max_images))
  samples = []
  for i in range(n):
    ex = source[i]
    image_id = _text(ex["id"])
    prob, theta = predict(np.asarray(ex["image"]))
    if not write:
      continue
    realoob_io.write_prediction(outdir, image_id, prob, theta)
    _write_rgb(os.path.join(outdir, "overlay", image_id + ".png"),
               overlay(np.asarray(ex["image"]), prob, theta))
    pr = realoob_io.read_prediction(outdir, image_id)
    samples.append({
        "id": image_id, "prob": pr["boundaries"],
        "theta_pred": pr["orientation"],
        "gts": list(np.asarray(ex["boundaries"], bool)),
        "theta_gts": list(np.asarray(ex["orientation"], np.float32)),
        "valids": list(np.asarray(ex["valid"], bool)),
    })
  if not write:
    return {}
  res = api.evaluate_arrays(
      samples, protocol=eval_config.get("protocol", "doob"),
      valid_only=bool(eval_config.get("valid_only", True)),
      border=int(eval_config.get("border", 2)),
      nthresh=int(eval_config.get("nthresh", 99)),
      num_workers=int(eval_config.get("num_workers", 0)) or None,
      matcher=eval_config.get("matcher", "exact"),
      bsds_seed=int(eval_config.get("bsds_seed", 0)))
  out = {k: float(res[k]) for k in HEADLINE}
  out["num_images"] = float(len(samples))
  return out


class Evaluator:
  """See the module docstring; constructed by the trainer."""

  def __init__(self, model, config, eval_config, workdir):
    from relations.occlusion import task as occlusion# pylint: disable=g-import-not-at-top
    from relations.occlusion.metrics import api# pylint: disable=g-import-not-at-top
    # Fail at start-up, not hours later at the first evaluation.
    api.check_matcher(eval_config.get("matcher", "exact"),
                      int(eval_config.get("bsds_seed", 0)))
    self.model, self.config, self.eval_config = model, config, eval_config
    self.workdir = workdir
    self.source = occlusion.make_builder(config).as_data_source(
        eval_config.split)
    vit_kw = dict(config.model.get("vit") or {})
    if config.model.get("vit_variant"):
      from relations.nn import vit# pylint: disable=g-import-not-at-top
      vit_kw = {**vit.decode_variant(config.model.vit_variant), **vit_kw}
    self.patch = int(vit_kw.get("patch_size", 16))

    def fwd(params, images):
      out = model.apply({"params": params}, images, train=False)
      prob = jax.nn.sigmoid(out["boundary_logits"])
      theta = out.get("orientation", jnp.zeros_like(prob))
      return prob, theta

    self._fwd = jax.jit(fwd)  # retraces once per padded image size

  def run(self, params, step):
    """Predicts the split with `params`; returns the scores of step `step`."""
    outdir = os.path.join(self.workdir, f"step_{int(step)}")

    def predict(image):
      x = image.astype(np.float32) / 127.5 - 1.0
      padded, hw = occlusion_pp.pad_to_multiple(x, self.patch)
      prob, theta = self._fwd(params, jnp.asarray(padded[None]))
      prob = occlusion_pp.crop_back(np.asarray(jax.device_get(prob))[0], hw)
      theta = occlusion_pp.crop_back(np.asarray(jax.device_get(theta))[0], hw)
      return prob, theta

    return predict_and_score(predict, self.source, outdir, self.eval_config,
                             write=jax.process_index() == 0)
