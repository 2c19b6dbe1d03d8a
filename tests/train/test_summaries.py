"""TensorBoard media: evaluator pictures and texts, PR curves, tracker frames, parameter overview."""

import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

from relations.train import summaries, trainer
from tests import tb_events, toy_task


def _png(b):
  return np.asarray(Image.open(io.BytesIO(b)).convert("RGB"))


def _writer(d):
  from clu import metric_writers  # pylint: disable=g-import-not-at-top

  return metric_writers.create_default_writer(str(d), asynchronous=False)


@pytest.mark.slow  # TensorFlow's import (clu's writer) alone takes 10-50 s on a busy machine
def test_write_eval_media_and_param_overview_round_trip(tmp_path):
  rng = np.random.default_rng(0)
  overlay = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
  frames = [np.full((10, 6, 3), 40 * i, np.uint8) for i in range(7)]
  strip = summaries.frame_strip(frames, count=4)
  assert strip.shape == (10, 24, 3)
  assert [strip[0, 6 * j, 0] for j in range(4)] == [0, 80, 160, 240]  # frames 0, 2, 4, 6
  pr = summaries.pr_curve_image({"B": ([0.1, 0.5, 0.9], [0.9, 0.6, 0.2])}, "step 3")
  assert pr.dtype == np.uint8 and pr.shape == (320, 320, 3) and pr.std() > 0
  text = summaries.generations_markdown([("a man | eats [xIntent]", ["to eat", "be full"])])
  assert text.splitlines()[2] == "| a man \\| eats [xIntent] | to eat<br>be full |"
  res = {
    "B-ODS": 0.5,
    "num_images": 3.0,
    summaries.MEDIA: {
      "images": {"overlay/img0": overlay, "pr_curves": pr, "tracker/detected/v1": strip},
      "texts": {"generations": text},
    },
  }
  w = _writer(tmp_path)
  rest = summaries.write_eval(w, 3, "val", res)
  assert rest == {"B-ODS": 0.5, "num_images": 3.0}  # media are not metrics
  params = {"encoder": {"w": jnp.full((300, 300), 2.0)}, "head": {"b": jnp.arange(5.0)}}
  summaries.write_param_overview(w, 3, params)
  w.flush()
  ev, kinds = tb_events.read(str(tmp_path)), tb_events.kinds(str(tmp_path))
  assert ev["val/B-ODS"] == [(3, 0.5)]
  for tag, want in (
    ("val/overlay/img0", overlay),
    ("val/pr_curves", pr),
    ("val/tracker/detected/v1", strip),
  ):
    assert kinds[tag] == "images"
    ((step, pngs),) = ev[tag]
    assert step == 3 and len(pngs) == 1
    np.testing.assert_array_equal(_png(pngs[0]), want)  # PNG is lossless
  assert kinds["val/generations"] == "text" and ev["val/generations"] == [(3, text)]
  assert ev["params/norm/encoder"] == [(3, pytest.approx(600.0))]  # sqrt(90000 * 4)
  assert ev["params/norm/head"] == [(3, pytest.approx(np.sqrt(30.0)))]
  assert kinds["params/hist/encoder"] == kinds["params/hist/head"] == "histograms"


def test_param_overview_samples_large_modules():
  n = summaries.HIST_SAMPLES * 3 + 5
  norms, samples = jax.device_get(
    summaries.param_overview({"m": {"x": jnp.arange(n, dtype=jnp.float32)}})
  )
  assert samples["m"].shape == (summaries.HIST_SAMPLES,)
  np.testing.assert_array_equal(samples["m"][:3], [0.0, 3.0, 6.0])  # stride 3
  assert norms["m"] == pytest.approx(np.sqrt(np.sum(np.arange(n, dtype=np.float64) ** 2)), rel=1e-5)


def test_bad_image_shape_names_it(tmp_path):
  with pytest.raises(ValueError, match=r"expected \[H, W, C\] or \[N, H, W, C\], got \(4, 5\)"):
    summaries.write_eval(
      _writer(tmp_path), 1, "v", {summaries.MEDIA: {"images": {"x": np.zeros((4, 5))}}}
    )


@pytest.mark.slow
def test_trainer_writes_eval_media_and_param_overview(tmp_path):
  c = toy_task.get_config()
  c.total_steps, c.log_every, c.checkpoint_every = 4, 2, 2
  c.evals = {"ev": {"type": "tests.scripted_evaluator", "every_steps": 2, "media": True}}
  run = str(tmp_path / "run")
  result = trainer.train(c, run)
  assert result.eval_metrics == {"ev/seconds": 0.0}  # no media among the metrics
  ev, kinds = tb_events.read(run), tb_events.kinds(run)
  assert [s for s, _ in ev["ev/frame"]] == [2, 4] and kinds["ev/frame"] == "images"
  assert _png(ev["ev/frame"][1][1][0])[0, 0].tolist() == [4, 0, 0]
  assert ev["ev/note"] == [(2, "step 2"), (4, "step 4")]
  # Parameter overview at each checkpoint step, per top-level module of the toy classifier.
  assert [s for s, _ in ev["params/norm/encoder"]] == [2, 4]
  assert kinds["params/hist/head"] == "histograms"
  assert all(v > 0 for _, v in ev["params/norm/head"])
