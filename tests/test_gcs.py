"""gs:// paths against a real GCS JSON API: fake-gcs-server on loopback (tests/gcs_emulator.py).

What a TPU pod launch reads and writes in a bucket: the workdir (checkpoints through orbax and
TensorStore, the run's json files through etils.epath), init_from checkpoints, annotations and
prediction files read through `relations.remote_inputs.local_copy`. Nothing may land in a local
`gs:` folder (the old `os.path.abspath("gs://b")` bug), which every test checks.

TensorBoard event files go through TensorFlow's own GCS client, which no emulator reaches, so
training runs here set `tensorboard=false`; everything else is the real path.
"""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from etils.epath import gpath as epath_gpath

from relations import io_util, remote_inputs
from relations.train import config_util
from tests.gcs_emulator import Emulator

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = "relations-test"
TOTAL = 8


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
  """The emulator with one bucket; this process's environment points epath/gcsfs at it."""
  tmp = tmp_path_factory.mktemp("gcs")
  server = Emulator(str(tmp / "server"))
  saved = dict(os.environ)
  try:
    server.create_bucket(BUCKET)
    os.environ.update(server.env(), RELATIONS_CACHE_DIR=str(tmp / "cache"))
    # etils caches "TensorFlow is installed" on first use; in a full run an earlier test has
    # cached True, and TF's own GCS client cannot be pointed at the emulator. Re-read it under
    # EPATH_USE_TF=0 (and again after, for the tests that follow).
    epath_gpath._is_tf_installed.cache_clear()
    yield server
  finally:
    os.environ.clear()
    os.environ.update(saved)
    epath_gpath._is_tf_installed.cache_clear()
    server.stop()


def _no_local_gs(*dirs):
  for d in dirs:
    for root, names, files in os.walk(d):
      assert not [n for n in names + files if n.startswith("gs:")], f"a local gs: entry in {root}"
      names[:] = [n for n in names if n not in (".git", ".venv", "__pycache__")]


def _read(path) -> str:
  with open(path) as f:
    return f.read()


def _upload(url, data: bytes):
  io_util.write_bytes_atomic(url, data)


# ------------------------------------------------------------------------------ remote_inputs


def test_gcs_local_copy_of_object_folder_and_changed_object(gcs, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  base = f"gs://{BUCKET}/inputs"
  _upload(f"{base}/ckpt/model.safetensors", b"w" * 10)
  _upload(f"{base}/ckpt/config.json", b'{"a": 1}')
  _upload(f"{base}/tok/vocab.json", b"{}")
  _upload(f"{base}/tok/sub/merges.txt", b"a b\n")

  # One object with the sibling its reader looks for; a missing sibling is no error.
  weights = remote_inputs.local_copy(
    f"{base}/ckpt/model.safetensors", siblings=("config.json", "preprocessor_config.json")
  )
  assert os.path.basename(weights) == "model.safetensors"
  assert _read(weights) == "w" * 10
  folder = os.path.dirname(weights)
  assert sorted(n for n in os.listdir(folder) if not n.startswith(".")) == [
    "config.json",
    "model.safetensors",
  ]
  # A folder is copied whole, sub-folders included.
  tok = remote_inputs.local_copy(f"{base}/tok")
  assert _read(os.path.join(tok, "sub", "merges.txt")) == "a b\n"
  assert os.path.basename(tok) == "tok"
  # A second call reuses the copy; a changed object is copied again; no temporary left over.
  assert remote_inputs.local_copy(f"{base}/tok") == tok
  _upload(f"{base}/tok/vocab.json", b'{"x": 0}')
  assert remote_inputs.local_copy(f"{base}/tok") == tok
  assert _read(os.path.join(tok, "vocab.json")) == '{"x": 0}'
  assert not [n for n in os.listdir(remote_inputs.cache_root()) if n.startswith(".tmp_")]
  # A local path is returned as it is; a URL naming nothing says so.
  assert remote_inputs.local_copy("relative/path") == "relative/path"
  with pytest.raises(FileNotFoundError, match=f"gs://{BUCKET}/inputs/nothing: no such object"):
    remote_inputs.local_copy(f"{base}/nothing")
  _no_local_gs(str(tmp_path))


# ------------------------------------------------------------------------------ init_from


def test_gcs_init_from_url_is_imported(gcs, tmp_path, monkeypatch):
  """A big_vision .npz in the bucket as `model.init_from` fills the occlusion model's ViT."""
  monkeypatch.chdir(tmp_path)
  from relations.nn import vit  # pylint: disable=g-import-not-at-top
  from relations.occlusion import task  # pylint: disable=g-import-not-at-top

  config = config_util.load_config(os.path.join(ROOT, "configs/occlusion.py:tiny"))
  model = task.make_model(config)
  size = int(config.data.image_size) if config.data.get("image_size") else 64
  shapes = jax.eval_shape(lambda: model.init(jax.random.key(0), jnp.zeros((1, size, size, 3))))
  params = jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), shapes["params"])
  prefix = task.vit_path(config)
  vit_params = params
  for k in prefix:
    vit_params = vit_params[k]
  rng = np.random.default_rng(0)
  ckpt = {
    k: rng.standard_normal(v.shape).astype(np.float32)
    for k, v in vit.flatten_params(vit_params).items()
  }
  local = tmp_path / "vit.npz"
  np.savez(local, **ckpt)
  url = f"gs://{BUCKET}/pretrained/vit.npz"
  _upload(url, local.read_bytes())
  os.remove(local)
  with config.unlocked():
    config.model.init_from = url
  loaded = task.load_pretrained(config, params)
  got = loaded
  for k in prefix:
    got = got[k]
  flat = vit.flatten_params(got)
  assert sorted(flat) == sorted(ckpt)
  for k, v in ckpt.items():
    np.testing.assert_array_equal(flat[k], v, err_msg=k)
  _no_local_gs(str(tmp_path))


# ------------------------------------------------------------------------------ evaluation inputs

_ANNOTS = [
  {"img_fn": "a.jpg", "event": "e", "intent": ["go home"], "before": ["walk in"], "after": ["sit"]}
]
_GENS = [
  {"event_idx": 0, "inference_relation": r, "generations": ["go home", "walk in", "sit down"]}
  for r in ("intent", "before", "after")
]


def test_gcs_evaluate_reads_prediction_files_from_the_bucket(gcs, tmp_path, monkeypatch, capsys):
  from relations import evaluate  # pylint: disable=g-import-not-at-top

  monkeypatch.chdir(tmp_path)
  for name, obj in (("annots.json", _ANNOTS), ("gens.json", _GENS)):
    (tmp_path / name).write_text(json.dumps(obj))
    _upload(f"gs://{BUCKET}/eval/{name}", json.dumps(obj).encode())

  def score(where, out):
    args = ["--annotations", f"{where}/annots.json", "--generations", f"{where}/gens.json"]
    assert evaluate.main(["commonsense", *args, "--no-meteor", "--output", out]) == 0
    return json.loads(io_util.read_bytes(out))

  local = score(str(tmp_path), str(tmp_path / "local.json"))
  remote = score(f"gs://{BUCKET}/eval", f"gs://{BUCKET}/eval/metrics.json")
  assert remote == local and local["num_hypotheses"] == 9
  assert remote["Bleu_1"] == local["Bleu_1"] > 0
  capsys.readouterr()
  # A URL naming nothing is an argument error naming it, not a traceback.
  missing = f"gs://{BUCKET}/eval/none.json"
  assert evaluate.main(["commonsense", "--annotations", missing, "--generations", "x"]) == 2
  assert f"gs://{BUCKET}/eval/none.json: no such object" in capsys.readouterr().err
  _no_local_gs(str(tmp_path))


def test_gcs_video_groundtruth_folder_is_found_in_the_bucket(gcs, tmp_path, monkeypatch):
  """A gs:// manual_dir's annotation folder is the split's GT (it was skipped without a word)."""
  import types  # pylint: disable=g-import-not-at-top

  from relations.video_relations import evaluator  # pylint: disable=g-import-not-at-top

  monkeypatch.chdir(tmp_path)
  root = f"gs://{BUCKET}/vidvrd"
  _upload(f"{root}/test/ILSVRC2015_train_00005003.json", b"{}")
  stub = types.SimpleNamespace(  # what groundtruth_path reads of an Evaluator
    ec=types.SimpleNamespace(split="test", get=lambda key, default=None: None),
    config=types.SimpleNamespace(dataset="vidvrd", data=types.SimpleNamespace(manual_dir=root)),
  )
  assert evaluator.Evaluator.groundtruth_path(stub) == f"{root}/test"
  local = remote_inputs.local_copy(f"{root}/test")
  assert os.listdir(local) == ["ILSVRC2015_train_00005003.json"]
  stub.config.data.manual_dir = f"gs://{BUCKET}/nothing-here"
  assert evaluator.Evaluator.groundtruth_path(stub) is None
  _no_local_gs(str(tmp_path))


# ------------------------------------------------------------------------------ a whole run


def _train(workdir, *extra):
  return [
    sys.executable,
    "-m",
    "relations.train",
    "--config",
    "tests/toy_task.py",
    "--workdir",
    workdir,
    f"--config.total_steps={TOTAL}",
    "--config.checkpoint_every=2",
    "--config.log_every=2",
    "--config.tensorboard=false",
    "--config.input.num_workers=2",  # as the paper configs read
    *extra,
  ]


def _bucket_steps(server, run):
  prefix = f"{run}/checkpoints/"
  steps = set()
  for name in server.names(BUCKET, prefix):
    first = name[len(prefix) :].split("/", 1)[0]
    if first.isdigit():
      steps.add(int(first))
  return sorted(steps)


def _run_logged(cmd, cwd, env, log_path, timeout):
  """Runs `cmd` with its output in a file (never an unread pipe: gcsfs logs a line per request,
  and a full pipe would block the run); returns (exit code, log text)."""
  with open(log_path, "w") as log:
    proc = subprocess.run(
      cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=timeout, check=False
    )
  with open(log_path) as f:
    return proc.returncode, f.read()


@pytest.mark.slow
def test_gcs_train_kill_resume_predict(gcs, tmp_path):
  cwd = str(tmp_path)  # where a URL made local would appear
  env = dict(
    os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
  )
  url = f"gs://{BUCKET}/run"
  first_log = tmp_path / "first.log"
  with open(first_log, "w") as log:
    proc = subprocess.Popen(
      _train(url), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
  try:
    deadline = time.time() + 300
    while not _bucket_steps(gcs, "run"):
      assert proc.poll() is None, first_log.read_text()[-3000:]
      assert time.time() < deadline, "no checkpoint in the bucket after 300 s"
      time.sleep(0.2)
    # A preempted VM: SIGTERM to the trainer and its input workers; it saves into the bucket.
    os.killpg(proc.pid, signal.SIGTERM)
    rc = proc.wait(timeout=120)
  finally:
    if proc.poll() is None:
      os.killpg(proc.pid, signal.SIGKILL)
      proc.wait()
  text = first_log.read_text()
  saved = _bucket_steps(gcs, "run")
  assert rc == 143 and saved and saved[-1] < TOTAL, (rc, saved, text[-3000:])
  assert f"Preempted: checkpoint saved at step {saved[-1]}" in text, text[-3000:]
  assert "run/config.json" in gcs.names(BUCKET, "run/config.json")

  rc, text = _run_logged(_train(url), cwd, env, tmp_path / "resume.log", 400)
  assert rc == 0, text[-3000:]
  assert f"Resumed from {url} at step {saved[-1]}" in text, text[-3000:]
  assert _bucket_steps(gcs, "run")[-1] == TOTAL
  summary = json.loads(io_util.read_bytes(f"{url}/train_summary.json"))
  assert summary["final_step"] == TOTAL and summary["preempted"] is False

  # Prediction restores the parameters from the bucket; its evaluator writes there.
  evals = "--config.evals={'pred': {'type': 'tests.scripted_evaluator', 'every_steps': 0}}"
  cmd = [sys.executable, "-m", "relations.predict", "--config", "tests/toy_task.py"]
  rc, text = _run_logged([*cmd, "--workdir", url, evals], cwd, env, tmp_path / "predict.log", 400)
  assert rc == 0, text[-3000:]
  assert gcs.names(BUCKET, f"run/predict_step{TOTAL}.json") == [f"run/predict_step{TOTAL}.json"]
  assert gcs.names(BUCKET, f"run/eval/pred/started_{TOTAL}") == [f"run/eval/pred/started_{TOTAL}"]
  _no_local_gs(cwd, ROOT)
