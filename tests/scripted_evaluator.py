"""A training-time evaluator that fails or takes its time on purpose (trainer fault tests only).

config.evals.<name> = dict(type="tests.scripted_evaluator", every_steps=N, fail=True)
    raises at every evaluation, as an evaluator whose external scorer is missing would;
config.evals.<name> = dict(type="tests.scripted_evaluator", every_steps=N, seconds=S)
    writes `<workdir>/started_<step>` (local or URL) and then evaluates for S seconds (a long evaluation that a
    preemption can hit), returning {"seconds": S}.
config.evals.<name> = dict(type="tests.scripted_evaluator", media=True)
    also returns TensorBoard media (MediaEvaluator).
"""

import os
import time

from relations import io_util


class Evaluator:
  def __new__(cls, model, config, eval_config, workdir):
    kind = MediaEvaluator if cls is Evaluator and eval_config.get("media", False) else cls
    return super().__new__(kind)

  def __init__(self, model, config, eval_config, workdir):
    del model, config
    self.eval_config, self.workdir = eval_config, workdir

  def run(self, params, step):
    del params
    if self.eval_config.get("fail", False):
      raise RuntimeError(f"scorer unavailable at step {step} (tests.scripted_evaluator)")
    # Through io_util, so a gs:// workdir gets it in the bucket.
    io_util.write_text_atomic(os.path.join(self.workdir, f"started_{step}"), "")
    seconds = float(self.eval_config.get("seconds", 0.0))
    time.sleep(seconds)
    return {"seconds": seconds}


class MediaEvaluator(Evaluator):
  """config.evals.<name> = dict(type="tests.scripted_evaluator", media=True): also returns
  TensorBoard media (`relations.train.summaries.MEDIA`): a 6x8 image and a text."""

  def run(self, params, step):
    import numpy as np  # pylint: disable=g-import-not-at-top

    from relations.train import summaries  # pylint: disable=g-import-not-at-top

    res = super().run(params, step)
    img = np.zeros((6, 8, 3), np.uint8)
    img[..., 0] = step  # which step wrote it
    return {**res, summaries.MEDIA: {"images": {"frame": img}, "texts": {"note": f"step {step}"}}}
