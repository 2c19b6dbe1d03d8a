"""Fault cases of issue 36 about prepared data: a read-only, already-prepared `data_dir`; a
damaged shard or `dataset_info.json` named in one error line; Ctrl-C of a trainer with input
workers."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

from relations.datasets import prepare
from relations.occlusion import stats
from relations.occlusion.data.occlusion_boundaries import make_dummy_data

DATASET = "occlusion_boundaries/realoob"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _snapshot(root):
  """{relative path: (mtime_ns, size)} of everything under `root` (folders included)."""
  out = {}
  for r, ds, fs in os.walk(root):
    for n in ds + fs:
      p = os.path.join(r, n)
      st = os.lstat(p)
      out[os.path.relpath(p, root)] = (st.st_mtime_ns, st.st_size)
  return out


def _chmod_tree(root, writable):
  for r, ds, fs in os.walk(root):
    for n in [*ds, *fs, ""]:
      p = os.path.join(r, n) if n else r
      mode = os.stat(p).st_mode
      w = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
      os.chmod(p, (mode | stat.S_IWUSR) if writable else (mode & ~w))


def _read_only_view(src, dst) -> bool:
  """A read-only bind mount of `src` at `dst` (read-only even for root); False where this user
  may not mount."""
  os.makedirs(dst)
  if os.geteuid() != 0 or shutil.which("mount") is None:
    return False
  if subprocess.run(["mount", "--bind", src, dst], check=False, capture_output=True).returncode:
    return False
  if subprocess.run(
    ["mount", "-o", "remount,bind,ro", dst], check=False, capture_output=True
  ).returncode:
    subprocess.run(["umount", dst], check=False, capture_output=True)
    return False
  return True


def test_fault_readonly_prepared_data_dir(tmp_path, capsys):
  prepared = str(tmp_path / "tfds")
  argv = [DATASET, "--manual_dir", make_dummy_data.HERE, "--data_dir"]
  assert prepare.main([*argv, prepared]) == 0  # prepared once, elsewhere
  capsys.readouterr()
  # The fault: the copy is read-only. `chmod -R a-w` for a user; root ignores permissions, so as
  # root a read-only bind mount (writes fail with EROFS, os.access says not writable).
  _chmod_tree(prepared, writable=False)
  data_dir = str(tmp_path / "ro")
  mounted = _read_only_view(prepared, data_dir)
  if not mounted:
    os.rmdir(data_dir)
    data_dir = prepared
  before = _snapshot(data_dir)
  try:
    assert not os.access(data_dir, os.W_OK)  # what the old up-front check refused
    assert prepare.main([*argv, data_dir]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"is already prepared in {data_dir}; nothing to do" in out
    assert "training pool:" in out  # the builder's summary, as after a build
    # Without --manual_dir too: nothing to build from is needed.
    assert prepare.main([DATASET, "--data_dir", data_dir]) == 0
    assert f"is already prepared in {data_dir}; nothing to do" in capsys.readouterr().out
    assert _snapshot(data_dir) == before  # nothing written, created or touched
  finally:
    if mounted:
      subprocess.run(["umount", data_dir], check=False)
    _chmod_tree(prepared, writable=True)


def test_fault_unprepared_data_dir_without_manual_dir_is_refused(tmp_path, capsys):
  data_dir = str(tmp_path / "tfds")
  assert prepare.main([DATASET, "--data_dir", data_dir]) == 2
  err = capsys.readouterr().err
  assert err == (
    f"error: --manual_dir is required: occlusion_boundaries is not prepared in {data_dir} yet "
    "(see python -m relations.datasets.prepare --help)\n"
  )
  assert not os.path.exists(data_dir) or os.listdir(data_dir) in ([], ["downloads"])


INFO_DIR = os.path.join("occlusion_boundaries", "realoob", "1.1.0")
SHARD = os.path.join(INFO_DIR, "occlusion_boundaries-train.array_record-00000-of-00001")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
  """The tiny RealOOB prepared once (array_record); tests damage copies of it."""
  data_dir = str(tmp_path_factory.mktemp("prepared") / "tfds")
  argv = [DATASET, "--manual_dir", make_dummy_data.HERE, "--data_dir", data_dir]
  assert prepare.main(argv) == 0
  return data_dir


def _damaged_copy(prepared, tmp_path):
  data_dir = str(tmp_path / "tfds")
  shutil.copytree(prepared, data_dir)
  return data_dir


def _flip_record_byte(shard):
  """Inverts 4 bytes a third into the shard's records (inside a chunk's data, past the header)."""
  with open(shard, "r+b") as f:
    data = bytearray(f.read())
    at = len(data.rstrip(b"\0")) // 3
    data[at : at + 4] = bytes(b ^ 0xFF for b in data[at : at + 4])
    f.seek(0)
    f.write(data)


def _one_error_line(err):
  lines = err.splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: "), err
  assert "Traceback" not in err
  return lines[0]


@pytest.mark.parametrize("damage", ["flipped_byte", "truncated"])
def test_fault_corrupt_tfds_shard(prepared, tmp_path, capsys, damage):
  data_dir = _damaged_copy(prepared, tmp_path)
  shard = os.path.join(data_dir, SHARD)
  if damage == "flipped_byte":
    _flip_record_byte(shard)
    cause, record = "chunk data hash mismatch", "record 3"  # the example in the damaged chunk
  else:
    os.truncate(shard, 1000)
    cause, record = "ArrayRecord file should be at least 64KB big", "record 0"
  capsys.readouterr()
  assert stats.main(["--data_dir", data_dir, "--splits", "train"]) == 2
  line = _one_error_line(capsys.readouterr().err)
  assert line.startswith(f"error: {shard}: {record}: damaged dataset file (")
  assert cause in line
  folder = os.path.join(data_dir, INFO_DIR)
  assert line.endswith(
    f"; delete {folder} and prepare the dataset again "
    "(python -m relations.datasets.prepare ... --manual_dir ...)"
  )


@pytest.mark.parametrize("damage", ["extra_data", "bad_splits"])
def test_fault_corrupt_dataset_info(prepared, tmp_path, capsys, damage):
  data_dir = _damaged_copy(prepared, tmp_path)
  info = os.path.join(data_dir, INFO_DIR, "dataset_info.json")
  if damage == "extra_data":
    with open(info, "a") as f:
      f.write("}garbage")  # e.g. two writers, or a partial overwrite
    where, cause = f"{info}: ", "Failed to load JSON: Extra data"
  else:
    with open(info) as f:
      d = json.load(f)
    d["splits"] = [{"name": "train", "shardLengths": "x"}]  # valid JSON, unparseable field
    with open(info, "w") as f:
      json.dump(d, f)
    where, cause = f"{info}: splits: ", "Failed to parse splits field"
  capsys.readouterr()
  assert stats.main(["--data_dir", data_dir, "--splits", "train"]) == 2
  line = _one_error_line(capsys.readouterr().err)
  assert line.startswith(f"error: {where}damaged dataset description ({cause}")
  assert f"; delete {os.path.join(data_dir, INFO_DIR)} and prepare the dataset again" in line
  # `prepare` on it says the same (it opens the builder the same way).
  assert prepare.main([DATASET, "--data_dir", data_dir]) == 2
  assert _one_error_line(capsys.readouterr().err) == line


@pytest.mark.slow  # a real training start (~40 s on 2 cores)
def test_fault_sigint_with_workers_is_one_line(prepared, tmp_path):
  """Ctrl-C (SIGINT to the whole foreground process group) of a trainer with 2 input workers:
  one `error: interrupted` line, exit 130, no worker left. Before, the shared memory of the
  batches in flight was unmapped at interpreter exit while device arrays still used it: the
  process died of SIGSEGV (exit -11) after its `error: interrupted` line."""
  cmd = [
    sys.executable,
    "-m",
    "relations.train",
    "--config",
    os.path.join(ROOT, "configs", "occlusion.py:tiny"),
    f"--config.data.data_dir={prepared}",
    "--workdir",
    str(tmp_path / "w"),
    "--config.total_steps=100000",
    "--config.input.num_workers=2",
  ]
  # One CPU device, as a laptop run (not conftest's 8 fake devices): jax then uses the batch's
  # memory in place, the shared memory the workers filled, which is what crashed at exit.
  env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
  env.update(PYTHONPATH=ROOT, PYTHONFAULTHANDLER="1")
  p = subprocess.Popen(
    cmd,
    env=env,
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    start_new_session=True,  # a process group of its own, as a terminal's foreground job
  )
  lines = []
  reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
  reader.start()
  deadline = time.time() + 240
  while not any(ln.startswith("[train] step 1/") for ln in list(lines)):
    assert p.poll() is None and time.time() < deadline, "".join(lines)
    time.sleep(0.2)
  time.sleep(1.0)  # training and its workers running, batches in flight
  workers = _group(p.pid)
  assert len(workers) >= 3, workers  # the trainer and its 2 grain workers (+ resource tracker)
  seen = len(lines)
  os.killpg(p.pid, signal.SIGINT)
  assert p.wait(120) == 130, "".join(lines)
  reader.join(10)
  after = "".join(lines[seen:])
  assert after == "error: interrupted\n", after
  # The workers and multiprocessing's resource tracker end within a few seconds (the watchdog
  # of `shm_transport.exit_with_parent` polls every 0.5 s).
  deadline = time.time() + 15
  while _group(p.pid) and time.time() < deadline:
    time.sleep(0.2)
  left = _group(p.pid)
  assert not left, subprocess.run(
    ["ps", "-o", "pid,stat,args", *left], capture_output=True, text=True
  ).stdout


def _group(pgid):
  """Pids of the processes still in process group `pgid`."""
  out = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False)
  return out.stdout.split()
