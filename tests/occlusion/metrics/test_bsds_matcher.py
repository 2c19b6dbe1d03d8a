"""`matcher="bsds"`: the counts of pyEdgeEval's BSDS matcher, through our pipeline.

The oracle is `reference.reference_counts` (pyEdgeEval's `correspond_pixels`
called per threshold and annotator, written independently of
`image_eval`).  The BSDS matcher is random, so each test first measures its
run-to-run spread (the oracle under several seeds), then checks that ours,
given one of those seeds, reproduces the oracle's run for that seed exactly,
which is inside the spread by construction and could not happen by chance.
"""

import json
import os
import sys

import ml_collections
import numpy as np
import pytest

from relations.occlusion import evaluator as occlusion_evaluator
from relations.occlusion.data import realoob_io as io
from relations.occlusion.metrics import api
from relations.occlusion.metrics import bsds
from relations.occlusion.metrics import cli as occlusion_cli
from relations.occlusion.metrics import image_eval
from tests.occlusion.metrics import reference
from relations.occlusion.metrics import synthetic
from tests.occlusion.metrics import fixtures

SEEDS = (1, 2, 3, 4, 5)
NTHRESH = 33


def _cases():
  """(name, args, kwargs): doob single annotator, doob with two annotators
  (one shifted by a pixel), white noise, and the SEval protocol."""
  p = fixtures.pairs()
  out = []
  for i in (1, 15, 20):
    s = p[i]
    out.append(
      (
        f"pair{i}",
        (s["prob"], s["gts"], s["theta_pred"], s["theta_gts"], s["valids"]),
        {"border": 2},
      )
    )
  s = p[4]
  g2 = np.roll(s["gts"][0], 1, axis=1)
  out.append(
    (
      "two_annotators",
      (
        s["prob"],
        [s["gts"][0], g2],
        s["theta_pred"],
        [s["theta_gts"][0], np.roll(s["theta_gts"][0], 1, axis=1)],
        [s["valids"][0], np.roll(s["valids"][0], 1, axis=1) & g2],
      ),
      {"border": 0},
    )
  )
  s = p[3]
  out.append(
    (
      "seval",
      (s["prob"], s["gts"], s["theta_pred"], s["theta_gts"], s["valids"]),
      {"border": 2, "protocol": "seval"},
    )
  )
  return out


def _oracle(args, kw, seed):
  bsds.reseed(seed)
  return reference.reference_counts(*args, nthresh=NTHRESH, **kw)


@pytest.mark.slow  # ~20 s of repeated BSDS matcher runs
def test_bsds_counts_are_pyedgeeval_counts_within_its_spread():
  spread_total = 0
  for name, args, kw in _cases():
    runs = [_oracle(args, kw, s) for s in SEEDS]
    lo = {k: np.min([r[k] for r in runs], 0) for k in image_eval.COUNT_KEYS}
    hi = {k: np.max([r[k] for r in runs], 0) for k in image_eval.COUNT_KEYS}
    spread_total += int((hi["cnt_r"] - lo["cnt_r"]).sum() + (hi["cnt_p"] - lo["cnt_p"]).sum())
    exact = image_eval.evaluate_image(*args, nthresh=NTHRESH, **kw)
    for seed, run in zip(SEEDS, runs):
      ours = image_eval.evaluate_image(*args, nthresh=NTHRESH, matcher="bsds", bsds_seed=seed, **kw)
      for k in image_eval.COUNT_KEYS:
        np.testing.assert_array_equal(ours[k], run[k], err_msg=f"{name} {k}")
        assert np.all(lo[k] <= ours[k]) and np.all(ours[k] <= hi[k])
      # The exact matcher never finds fewer pairs (GT side, per annotator).
      assert np.all(exact["cnt_r"] >= ours["cnt_r"]), name
    # Same seed, same run: the seed is what makes the two agree.
    again = image_eval.evaluate_image(
      *args, nthresh=NTHRESH, matcher="bsds", bsds_seed=SEEDS[0], **kw
    )
    np.testing.assert_array_equal(again["cnt_p"], runs[0]["cnt_p"])
  # The matcher's own run-to-run spread is real on these fixtures (so the
  # equalities above are not the trivial agreement of a deterministic
  # matcher).
  assert spread_total > 0


def test_unseeded_bsds_runs_stay_at_or_below_the_maximum_matching():
  _, args, kw = _cases()[1]
  exact = image_eval.evaluate_image(*args, nthresh=NTHRESH, **kw)
  runs = [image_eval.evaluate_image(*args, nthresh=NTHRESH, matcher="bsds", **kw) for _ in range(3)]
  for r in runs:
    assert np.all(r["cnt_r"] <= exact["cnt_r"])
    np.testing.assert_array_equal(r["sum_p"], exact["sum_p"])
    np.testing.assert_array_equal(r["sum_r"], exact["sum_r"])


def test_api_seeds_image_i_with_seed_plus_i_for_any_worker_count():
  cases = [c for c in _cases() if c[2].get("protocol") != "seval"][:4]
  samples = [
    {"prob": a[0], "gts": a[1], "theta_pred": a[2], "theta_gts": a[3], "valids": a[4]}
    for _, a, _ in cases
  ]
  ref = [_oracle(a, {"border": 2}, 40 + i) for i, (_, a, _) in enumerate(cases)]
  for workers in (1, 2):
    out = api.evaluate_arrays(
      samples,
      border=2,
      nthresh=NTHRESH,
      with_ac=False,
      num_workers=workers,
      matcher="bsds",
      bsds_seed=40,
    )
    assert out["matcher"] == "bsds"
    for got, want in zip(out["per_image"], ref):
      for k in image_eval.COUNT_KEYS:
        np.testing.assert_array_equal(got[k], want[k])
  want = api.summarize_counts(ref)
  for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP"):
    assert out[k] == want[k]


def _write_layout(root, n=3, shape=(72, 96)):
  rng = np.random.default_rng(19)
  samples = []
  for i in range(n):
    gt = synthetic.make_scene(rng, *shape, num_shapes=4)
    prob, theta = synthetic.make_prediction(rng, gt, noise=0.3)
    io.write_gt(
      os.path.join(root, "gt"),
      f"im{i}",
      gt["boundaries"],
      gt["orientation"],
      gt["valid"],
      gt["depth"],
    )
    io.write_prediction(os.path.join(root, "pred"), f"im{i}", prob, theta)
    samples.append(f"im{i}")
  return samples


def test_cli_matcher_bsds_records_matcher_and_equals_the_oracle(tmp_path, capsys):
  ids = _write_layout(str(tmp_path))
  gt, pred = str(tmp_path / "gt"), str(tmp_path / "pred")
  outs = {}
  for matcher in ("exact", "bsds"):
    out = str(tmp_path / f"{matcher}.json")
    rc = occlusion_cli.main(
      [
        "--gt",
        gt,
        "--pred",
        pred,
        "--nthresh",
        "9",
        "--matcher",
        matcher,
        "--bsds-seed",
        "7",
        "--workers",
        "2",
        "--output",
        out,
        "--plot",
        "",
      ]
    )
    assert rc == 0
    assert f"matcher={matcher}" in capsys.readouterr().out
    with open(out) as f:
      outs[matcher] = json.load(f)
    assert outs[matcher]["matcher"] == matcher
  assert outs["bsds"]["bsds_seed"] == 7
  # The oracle on the same decoded files, image i seeded with 7 + i.
  ref = []
  for i, image_id in enumerate(ids):
    s = api.load_pair(gt, pred, image_id)
    bsds.reseed(7 + i)
    c = reference.reference_counts(
      s["prob"], s["gts"], s["theta_pred"], s["theta_gts"], s["valids"], nthresh=9, border=2
    )
    ref.append(c)
  want = api.summarize_counts(ref, valid_only=True)
  for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP"):
    assert outs["bsds"][k] == pytest.approx(want[k], abs=0, rel=0), k
  # One annotator: exact has at least as many pairs at every threshold, so
  # R and P, hence F and B-ODS, are never lower.
  assert outs["exact"]["B-ODS"] >= outs["bsds"]["B-ODS"]


def test_missing_pyedgeeval_is_one_line_saying_how_to_install(tmp_path, capsys, monkeypatch):
  monkeypatch.setitem(sys.modules, "pyEdgeEval._lib", None)
  # Checked before any input is read: the directories exist but hold no data at all.
  (tmp_path / "gt").mkdir()
  (tmp_path / "pred").mkdir()
  rc = occlusion_cli.main(
    ["--gt", str(tmp_path / "gt"), "--pred", str(tmp_path / "pred"), "--matcher", "bsds"]
  )
  err = capsys.readouterr().err
  assert rc == 2
  assert err.count("\n") == 1 and err.startswith("error: matcher 'bsds'")
  assert "pip install --no-build-isolation pyedgeeval==0.2.8" in err
  with pytest.raises(bsds.MatcherUnavailableError, match="pyedgeeval==0.2.8"):
    api.evaluate_arrays([fixtures.pairs()[0]], matcher="bsds")
  # The training-time evaluator refuses at construction.
  cfg = ml_collections.ConfigDict({"matcher": "bsds", "bsds_seed": 0})
  with pytest.raises(bsds.MatcherUnavailableError, match="no-build-isolation"):
    occlusion_evaluator.Evaluator(None, None, cfg, str(tmp_path))
  # "exact" needs nothing from pyEdgeEval.
  out = api.evaluate_arrays([fixtures.pairs()[0]], nthresh=5, with_ac=False)
  assert out["matcher"] == "exact"


def test_bad_matcher_arguments(tmp_path, capsys):
  with pytest.raises(ValueError, match="matcher must be one of"):
    api.evaluate_arrays([fixtures.pairs()[0]], matcher="csa")
  rc = occlusion_cli.main(
    ["--gt", str(tmp_path), "--pred", str(tmp_path), "--matcher", "bsds", "--bsds-seed", "-1"]
  )
  assert rc == 2
  assert "bsds_seed must be in [0, 2^40), got -1" in capsys.readouterr().err


def test_training_time_evaluator_passes_the_matcher(tmp_path):
  rng = np.random.default_rng(5)
  source = []
  preds = {}
  for i in range(2):
    gt = synthetic.make_scene(rng, 64, 80, num_shapes=3)
    prob, theta = synthetic.make_prediction(rng, gt)
    image = rng.integers(0, 255, (64, 80, 3), dtype=np.uint8)
    preds[image.tobytes()] = (prob, theta)
    source.append(
      {
        "id": f"s{i}",
        "image": image,
        "boundaries": gt["boundaries"][None],
        "orientation": gt["orientation"][None],
        "valid": gt["valid"][None],
      }
    )
  cfg = ml_collections.ConfigDict(
    {
      "split": "test",
      "max_images": 0,
      "protocol": "doob",
      "valid_only": True,
      "border": 2,
      "nthresh": 9,
      "num_workers": 1,
      "matcher": "bsds",
      "bsds_seed": 3,
    }
  )
  got = occlusion_evaluator.predict_and_score(
    lambda im: preds[im.tobytes()], source, str(tmp_path / "p"), cfg
  )
  ref = []
  for i in range(2):
    pr = io.read_prediction(str(tmp_path / "p"), f"s{i}")
    bsds.reseed(3 + i)
    ref.append(
      reference.reference_counts(
        pr["boundaries"],
        [source[i]["boundaries"][0]],
        pr["orientation"],
        [source[i]["orientation"][0]],
        [source[i]["valid"][0]],
        nthresh=9,
        border=2,
      )
    )
  want = api.summarize_counts(ref, valid_only=True)
  for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP"):
    assert got[k] == want[k], k
