"""The challenge workflow on a split without ground truth, through the user's commands.

A synthetic release whose test videos have no annotation (VidOR: `video/<group>/<id>.mp4` that no
annotation names; ImageNet-VidVRD: `videos/<id>.mp4` with no `test/` folder) -> `relations.datasets
.prepare` -> `relations.train` (tiny, 2 steps; its `test` evaluator writes the submission at the
end without scoring) -> `relations.predict --eval test` -> the official submission, accepted by the
validator, listing every test video. One trained run per dataset (module fixture).
"""

import json
import os

import pytest

from relations.datasets import prepare
from relations import predict
from relations.train import __main__ as train_main
from relations.video_relations.data import synthetic
from relations.video_relations.metrics import cli as vrd_cli
from relations.video_relations.metrics import validate

pytestmark = pytest.mark.slow  # two tiny trainings (VidOR, VidVRD), shared by the tests below

STEPS = 2
# A smaller graph than `tiny` compiles faster; same code paths (as tests/video_relations/
# test_end_to_end.py).
SMALL = [
  f"--config.total_steps={STEPS}",
  f"--config.checkpoint_every={STEPS}",
  "--config.log_every=1",
  "--config.model.vit.depth=1",
  "--config.model.det_layers=1",
  "--config.input.image_size=(48, 64)",
  "--config.model.num_queries=8",
  # Without ground truth only the detected mode runs; the VidOR `val` evaluator, run at the end
  # of training, is kept to its cheapest (one video, one mode).
  "--config.video.tracks=detected",
]


def _test_video_ids(raw, dataset):
  if dataset == "vidor":
    annotated = {
      n[:-5]
      for split in ("training", "validation")
      for _, _, files in os.walk(os.path.join(raw, "annotation", split))
      for n in files
    }
    videos = {n[:-4] for _, _, files in os.walk(os.path.join(raw, "video")) for n in files}
  else:
    annotated = {n[:-5] for n in os.listdir(os.path.join(raw, "train"))}
    videos = {n[:-4] for n in os.listdir(os.path.join(raw, "videos"))}
  return sorted(videos - annotated)


def _train(dataset, tmp_path_factory):
  root = tmp_path_factory.mktemp(f"test_split_{dataset}")
  raw, data_dir, workdir = str(root / "raw"), str(root / "tfds"), str(root / "run")
  synthetic.generate(
    raw,
    num_train=2,
    num_val=1 if dataset == "vidor" else 0,
    num_test=2,
    seed=4,
    min_frames=40,
    max_frames=48,
    layout=dataset,
  )
  assert prepare.main([f"{dataset}/fps6_short96", "--manual_dir", raw, "--data_dir", data_dir]) in (
    0,
    None,
  )
  spec = f"configs/video_relations.py:tiny,dataset={dataset}"
  common = [
    "--config",
    spec,
    "--workdir",
    workdir,
    f"--config.data.manual_dir={raw}",
    f"--config.data.data_dir={data_dir}",
    *SMALL,
  ]
  if dataset == "vidor":
    common += [
      "--config.evals.val.prior=False",
      "--config.evals.val.gifs=0",
      "--config.evals.val.max_videos=1",
      # The training-time zero-shot numbers and breakdown (compared with the CLI below).
      "--config.evals.val.zero_shot=true",
      "--config.evals.val.breakdown=true",
    ]
  else:
    common += ["--config.evals.test.prior=False", "--config.evals.test.gifs=0"]
  assert train_main.main(common) in (0, None)
  return dataset, raw, workdir, common


@pytest.fixture(scope="module")
def vidor_run(tmp_path_factory):
  return _train("vidor", tmp_path_factory)


@pytest.fixture(scope="module")
def vidvrd_run(tmp_path_factory):
  return _train("vidvrd", tmp_path_factory)


@pytest.fixture(params=["vidor", "vidvrd"])
def run(request):
  return request.getfixturevalue(f"{request.param}_run")


def _check_submission(path, dataset, raw):
  with open(path) as f:
    sub = json.load(f)
  assert sub["version"] == "VERSION 1.0"
  assert sub["external_data"] == {"used": False, "details": ""}
  assert sorted(sub["results"]) == _test_video_ids(raw, dataset)
  for rels in sub["results"].values():
    assert len(rels) <= 200
  report = validate.validate_file(path, None, "vru20", dataset, unique_keys=True)
  assert report.ok and not report.warnings, report.summary()
  return sub


def test_training_writes_the_test_submission_unscored(run):
  dataset, raw, workdir, _ = run
  path = os.path.join(workdir, "eval", "test", f"submission_detected_step{STEPS}.json")
  _check_submission(path, dataset, raw)
  # Only the detected mode exists without ground-truth tracks; nothing is scored.
  assert not os.path.exists(
    os.path.join(workdir, "eval", "test", f"submission_groundtruth_step{STEPS}.json")
  )


def test_predict_eval_test_writes_validated_submission(run, capsys):
  dataset, raw, workdir, common = run
  path = os.path.join(workdir, "eval", "test", f"submission_detected_step{STEPS}.json")
  os.remove(path)
  capsys.readouterr()
  assert predict.main([*common, "--eval", "test"]) == 0
  out = capsys.readouterr().out
  sub = _check_submission(path, dataset, raw)
  size = os.path.getsize(path)
  assert f"wrote submission {path} ({size} bytes, {len(sub['results'])} videos" in out
  assert "no ground truth: not scored" in out
  with open(os.path.join(workdir, f"predict_step{STEPS}.json")) as f:
    metrics = json.load(f)["test"]
  assert metrics == {
    "detected/num_videos": 2.0,
    "detected/num_relations": float(sum(map(len, sub["results"].values()))),
    "detected/submission_bytes": float(size),
    "detected/validator_warnings": 0.0,
  }


def test_training_time_zero_shot_and_breakdown_equal_the_cli(vidor_run, tmp_path):
  _, raw, workdir, _ = vidor_run
  with open(os.path.join(workdir, "train_summary.json")) as f:
    summary = json.load(f)
  val = os.path.join(workdir, "eval", "val")
  out = tmp_path / "cli.json"
  argv = [
    "--groundtruth",
    os.path.join(raw, "annotation", "validation"),
    "--prediction",
    os.path.join(val, f"submission_detected_step{STEPS}.json"),
    "--protocol",
    "vru20",
    "--zero-shot",
    os.path.join(raw, "annotation", "training"),
    "--breakdown",
  ]
  assert vrd_cli.main([*argv, "--output", str(out)]) == 0
  cli = json.loads(out.read_text())
  for k in ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10"):
    assert summary[f"val/detected/{k}"] == cli[k]
    for name in ("zero_shot", "generalized_zero_shot"):
      if cli[name] is None:  # no zero-shot GT in this split: no metric either
        assert f"val/detected/{name}/{k}" not in summary
      else:
        assert summary[f"val/detected/{name}/{k}"] == cli[name][k]
    for t, m in cli["breakdown"]["predicate_type"].items():
      assert summary[f"val/detected/type/{t}/{k}"] == m[k]
  with open(os.path.join(val, f"breakdown_detected_step{STEPS}.json")) as f:
    assert json.load(f) == cli["breakdown"]
