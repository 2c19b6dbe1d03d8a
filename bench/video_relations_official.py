"""Loads and runs the official VidVRD-helper scorers from a local checkout.

Used by `bench/video_relations_eval.py` and `bench/video_relations_fuzz_official.py` only (the code is
read from the checkout at run time, nothing is copied). The `evaluation/`
folder is imported as a package under a synthetic parent name, so its
`__init__.py` (which imports unrelated modules) is not executed.

  xdshang/VidVRD-helper        evaluation/visual_relation_detection.py  (helper)
  NExTplusplus/VidVRD-helper   evaluation/video_relation_detection.py   (vru20)
"""

import contextlib
import importlib
import io
import os
import sys
import types

MODULES = {"helper": "visual_relation_detection", "vru20": "video_relation_detection"}


def load(checkout: str, protocol: str):
  """Returns the official module scoring `protocol` from `checkout`."""
  module = MODULES[protocol]
  folder = os.path.join(checkout, "evaluation")
  if not os.path.exists(os.path.join(folder, module + ".py")):
    raise FileNotFoundError(
      f"{folder}/{module}.py not found: --official must be a checkout of "
      + ("xdshang/VidVRD-helper" if protocol == "helper" else "NExTplusplus/VidVRD-helper")
    )
  name = f"_official_vrd_{protocol}"
  if name not in sys.modules:
    pkg = types.ModuleType(name)
    pkg.__path__ = [folder]
    sys.modules[name] = pkg
  return importlib.import_module(f"{name}.{module}")


def load_common(checkout: str):
  """The official `evaluation/common.py` (its `viou`) from `checkout`."""
  load(checkout, "helper")
  return importlib.import_module("_official_vrd_helper.common")


def run(mod, groundtruth, prediction, protocol):
  """Calls the official `evaluate`, silencing its prints and progress bar.

  Returns:
    ("ok", (mean_ap, rec_at_n, mprec_at_n)) or ("error", exception type name).
  """
  out = io.StringIO()
  try:
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
      if protocol == "helper":
        res = mod.evaluate(groundtruth, prediction)
      else:
        res = mod.evaluate(groundtruth, prediction, top_returns=200)
  except Exception as e:  # pylint: disable=broad-except
    return "error", type(e).__name__
  return "ok", res


def printed_lines(res):
  """The six lines the official code prints for `res`."""
  mean_ap, rec, prec = res
  return [
    f"detection mean AP (used in challenge): {mean_ap}",
    f"detection recall@50: {rec[50]}",
    f"detection recall@100: {rec[100]}",
    f"tagging precision@1: {prec[1]}",
    f"tagging precision@5: {prec[5]}",
    f"tagging precision@10: {prec[10]}",
  ]


def zero_shot_inputs(groundtruth, prediction, zs_triplets, generalized):
  """The zero-shot inputs as the official `evaluate.py` scripts build them.

  generalized=False: xdshang `evaluate.py` (new zero-shot setting);
  generalized=True: NExTplusplus `evaluate.py` (all predictions kept).
  Written here from the scripts' logic because they need the dataset objects.
  """
  gt, pred = {}, {}
  for vid, rels in groundtruth.items():
    zs_gt = [r for r in rels if tuple(r["triplet"]) in zs_triplets]
    if zs_gt:
      gt[vid] = zs_gt
      if generalized:
        pred[vid] = prediction.get(vid, [])
      else:
        pred[vid] = [r for r in prediction.get(vid, []) if tuple(r["triplet"]) in zs_triplets]
  return gt, pred
