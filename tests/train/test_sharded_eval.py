"""The sharded evaluation loop: `relations.predict` over 2 processes (jax.distributed on loopback)
writes the same official files and returns the same metrics, on every process, as 1 process.

Each task's tiny config evaluates a split whose size does not divide by 2 (3 images, 5 records and
3 Acc@50 queries, 3 videos), so one process has a row more than the other and the last local
batches are padded. Parameters are a freshly initialised checkpoint (no training step compiled);
`relations.predict` restores them from the checkpoint's metadata without reading training data.
"""

import filecmp
import json
import os
import shutil
import subprocess
import sys

import jax
import numpy as np
import portpicker
import pytest

from relations.train import checkpoint as ckpt_lib
from relations.train import config_util, eval_loop, trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _checkpoint(spec, overrides, workdir, step=1):
  """Saves freshly initialised parameters of `spec` as checkpoint `step` of `workdir`."""
  config = config_util.load_config(spec, overrides)
  s = trainer.setup(config)
  with jax.set_mesh(s["mesh"]):
    state = jax.jit(s["init_fn"], out_shardings=s["state_sh"])(jax.random.key(int(config.seed)))
  mngr = ckpt_lib.make_manager(workdir, keep=1, async_save=False)
  ckpt_lib.save(mngr, step, state, {"step": step, "data_seed": int(config.seed)}, force=True)
  mngr.wait_until_finished()
  mngr.close()
  return config


def _predict(spec, overrides, workdir, nproc):
  """Runs `relations.predict` with `nproc` processes (2 CPU devices each); returns each process's
  printed metrics."""
  port = portpicker.pick_unused_port()
  procs = []
  for pid in range(nproc):
    env = dict(os.environ)
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    if nproc > 1:
      env.update(
        RELATIONS_JAX_INIT="1",
        RELATIONS_COORDINATOR=f"127.0.0.1:{port}",
        RELATIONS_NUM_PROCESSES=str(nproc),
        RELATIONS_PROCESS_ID=str(pid),
        RELATIONS_INIT_TIMEOUT="120",
      )
    cmd = [
      sys.executable,
      "-m",
      "relations.predict",
      "--config",
      spec,
      "--workdir",
      workdir,
      *(f"--config.{o}" for o in overrides),
    ]
    procs.append(
      subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
      )
    )
  logs = []
  for p in procs:
    try:
      logs.append(p.communicate(timeout=500)[0])
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
  for p, log in zip(procs, logs):
    assert p.returncode == 0, log[-4000:]
  metrics = []
  for log in logs:
    lines = [l for l in log.splitlines() if l.startswith("metrics ")]
    assert len(lines) == 1, log[-3000:]
    metrics.append(json.loads(lines[0][len("metrics ") :]))
  return metrics


def _files(root):
  out = []
  for d, _, names in os.walk(root):
    out += [os.path.relpath(os.path.join(d, n), root) for n in names]
  return sorted(out)


def _one_vs_two(spec, overrides, tmp_path, ignore=(), prepare=None):
  """Predicts with 1 and with 2 processes from the same checkpoint; compares files and metrics.

  `prepare(config)` builds any dataset the processes read (data is prepared before a multi-process
  run, not by its processes concurrently).
  """
  base = str(tmp_path / "ckpt")
  config = _checkpoint(spec, overrides, base)
  if prepare:
    prepare(config)
  runs = {}
  for nproc in (1, 2):
    w = str(tmp_path / f"w{nproc}")
    shutil.copytree(base, w)
    runs[nproc] = (w, _predict(spec, overrides, w, nproc))
  (w1, [m1]), (w2, m2) = runs[1], runs[2]
  assert m2[0] == m2[1] == m1, (m1, m2)
  e1, e2 = os.path.join(w1, "eval"), os.path.join(w2, "eval")
  files = _files(e1)
  assert files == _files(e2)
  for f in files:
    if os.path.basename(f) in ignore:
      continue
    assert filecmp.cmp(os.path.join(e1, f), os.path.join(e2, f), shallow=False), f
  with open(os.path.join(w2, "predict_step1.json")) as f:
    assert json.load(f) == m1
  return m1, w1, w2, files


def test_shard_indices_cover_the_split_once_and_batches_pad_with_a_mask():
  shards = [eval_loop.shard_indices(7, p, 3) for p in range(3)]
  assert shards == [[0, 3, 6], [1, 4], [2, 5]]
  got = list(eval_loop.batches([1, 4, 7], 2))
  assert [b for b, _ in got] == [[1, 4], [7, 7]]
  assert [m.tolist() for _, m in got] == [[True, True], [True, False]]


def test_predict_shard_returns_real_rows_in_index_order():
  seen = []

  def predict(batch):
    seen.append(batch["x"].shape)
    return {"y": np.asarray(batch["x"]) * 2}

  load = lambda i: {"x": np.full((3,), i, np.float32)}
  out = eval_loop.predict_shard(
    5, load, predict, 2, lambda i, o: float(o["y"][0]), process_index=1, process_count=2
  )
  assert out == [(1, 2.0), (3, 6.0)]
  bs = eval_loop.local_batch_size(2)
  assert all(s == (bs, 3) for s in seen)


@pytest.mark.slow
def test_occlusion_sharded_eval_two_processes_equal_one(tmp_path):
  from relations.occlusion.data.occlusion_boundaries import make_dummy_data  # pylint: disable=g-import-not-at-top

  spec = "configs/occlusion.py:tiny"
  overrides = [
    f"data.data_dir={tmp_path / 'tfds'}",
    f"data.manual_dir={make_dummy_data.HERE}",
    "input.crop_size=(32, 32)",
    "input.batch_size=8",
    "evals.test.nthresh=9",
    "evals.test.num_workers=1",
    # 3 images: 2 on process 0, 1 on process 1 (a padded batch).
    "evals.test.split=train",
    "evals.test.max_images=3",
  ]
  m, _, _, files = _one_vs_two(spec, overrides, tmp_path)
  assert m["test"]["num_images"] == 3.0
  for k in ("B-ODS", "B-OIS", "B-AP", "O-ODS", "O-OIS", "O-AP"):
    assert 0.0 <= m["test"][k] <= 1.0
  assert len([f for f in files if f.startswith("test/step_1/boundaries/")]) == 3
  assert len([f for f in files if f.startswith("test/step_1/overlay/")]) == 3


@pytest.mark.slow
def test_commonsense_sharded_eval_two_processes_equal_one(tmp_path):
  from relations.commonsense.data import synthetic as synthetic_commonsense  # pylint: disable=g-import-not-at-top

  data = str(tmp_path / "data")
  synthetic_commonsense.generate(
    data, seed=1, train_images=4, val_images=6, test_images=1, verbose=False
  )
  spec = "configs/commonsense.py:variant=tiny"
  overrides = [
    f"data.data_dir={tmp_path / 'tfds'}",
    f"data.manual_dir={data}",
    "input.batch_size=8",
    "evals.val.meteor=False",
    # 5 (event, relation) records and 3 Acc@50 queries: uneven over 2 processes.
    "evals.val.max_records=5",
    "evals.val.batch_size=2",
    "evals.val.acc50_max_queries=3",
    "evals.val.acc50_batch_size=2",
  ]
  from relations.commonsense import task  # pylint: disable=g-import-not-at-top

  m, w1, w2, files = _one_vs_two(
    spec,
    overrides,
    tmp_path,
    ignore=("metrics.json",),
    prepare=lambda c: task.make_builder(c, "generation"),
  )
  gen = "val/step_1/val_sample_1_num_5_top_k_0_top_p_0.9.json"
  assert gen in files
  with open(os.path.join(w1, "eval", gen)) as f:
    records = json.load(f)
  assert [r["event_idx"] for r in records] == [0, 0, 0, 1, 1]
  assert all(len(r["generations"]) == 5 for r in records)
  assert m["val"]["num_queries"] == 3.0
  assert 0.0 <= m["val"]["Acc@50"] <= 1.0
  metrics = []
  for w in (w1, w2):
    with open(os.path.join(w, "eval", "val", "step_1", "metrics.json")) as f:
      d = json.load(f)
    assert d.pop("generations_file") == os.path.join(w, "eval", gen)
    assert d.pop("rank_file") == os.path.join(w, "eval", "val", "step_1", "val_rank_random_50.json")
    metrics.append(d)
  assert metrics[0] == metrics[1]


@pytest.mark.slow
def test_video_relations_sharded_eval_two_processes_equal_one(tmp_path):
  from relations.video_relations.data import synthetic as synthetic_vidor  # pylint: disable=g-import-not-at-top

  raw = str(tmp_path / "raw")
  synthetic_vidor.generate(raw, 1, 3, seed=5, min_frames=40, max_frames=48)
  spec = "configs/video_relations.py:tiny"
  overrides = [
    f"data.data_dir={tmp_path / 'tfds'}",
    f"data.manual_dir={raw}",
    "model.vit.depth=1",
    "model.det_layers=1",
    "input.image_size=(48, 64)",
    "model.num_queries=8",
    "evals.val.prior=False",
    "evals.val.gifs=1",
  ]
  m, _, _, files = _one_vs_two(spec, overrides, tmp_path)
  assert "val/submission_groundtruth_step1.json" in files
  assert "val/submission_detected_step1.json" in files
  assert len([f for f in files if f.startswith("val/gif_")]) == 2
  for mode in ("groundtruth", "detected"):
    assert m["val"][f"{mode}/validator_warnings"] == 0


@pytest.mark.slow
def test_predict_reads_only_the_evaluation_split(tmp_path, capsys):
  from relations import predict  # pylint: disable=g-import-not-at-top
  from relations.occlusion.data.occlusion_boundaries import make_dummy_data  # pylint: disable=g-import-not-at-top

  spec = "configs/occlusion.py:tiny"
  tfds_dir = tmp_path / "tfds"
  overrides = [
    f"data.data_dir={tfds_dir}",
    f"data.manual_dir={make_dummy_data.HERE}",
    "input.crop_size=(32, 32)",
    "input.batch_size=8",
    "evals.test.nthresh=9",
    "evals.test.num_workers=1",
  ]
  workdir = str(tmp_path / "w")
  _checkpoint(spec, overrides, workdir)
  # Remove the prepared training split; the official release is not reachable either.
  (prepared,) = (tfds_dir / "occlusion_boundaries" / "realoob").iterdir()  # the builder's version
  train_files = [f for f in os.listdir(prepared) if "-train." in f]
  assert train_files
  for f in train_files:
    os.remove(prepared / f)
  overrides[1] = f"data.manual_dir={tmp_path / 'absent'}"
  rc = predict.main(["--config", spec, "--workdir", workdir, *(f"--config.{o}" for o in overrides)])
  assert rc == 0
  out = capsys.readouterr().out
  metrics = json.loads(next(l for l in out.splitlines() if l.startswith("metrics "))[8:])
  assert metrics["test"]["num_images"] == 2.0
  assert sorted(os.listdir(os.path.join(workdir, "eval", "test", "step_1", "boundaries"))) == [
    "test_00000.png",
    "test_00001.png",
  ]
  # The training source is indeed gone: building it fails.
  from relations.occlusion import task  # pylint: disable=g-import-not-at-top

  config = config_util.load_config(spec, overrides)
  with pytest.raises(RuntimeError, match="-train.array_record"):
    task.make_train_source(config)[0]
