"""Evaluation gather through per-process shard files merged by process 0 (2 processes, loopback)."""

import json
import os
import subprocess
import sys

import numpy as np
import portpicker

from relations.train import eval_loop

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_shard_files_merged_by_process_zero(tmp_path):
  port = portpicker.pick_unused_port()
  out = str(tmp_path / "out")
  procs = []
  for pid in range(2):
    env = dict(os.environ)
    env.update(
      RELATIONS_COORDINATOR=f"127.0.0.1:{port}",
      RELATIONS_NUM_PROCESSES="2",
      RELATIONS_PROCESS_ID=str(pid),
      RELATIONS_INIT_TIMEOUT="120",
      XLA_FLAGS="--xla_force_host_platform_device_count=2",
    )
    procs.append(
      subprocess.Popen(
        [sys.executable, "-m", "tests.train.mp_gather_driver", str(tmp_path), out],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
      )
    )
  logs = []
  for p in procs:
    try:
      logs.append(p.communicate(timeout=300)[0])
    except subprocess.TimeoutExpired:
      for q in procs:
        q.kill()
      raise
  for p, log in zip(procs, logs):
    assert p.returncode == 0, log[-3000:]
  records = []
  for p in range(2):
    with open(f"{out}_{p}.json", encoding="utf-8") as f:
      records.append(json.load(f))
  r0, r1 = records
  want = {"indices": [0, 1, 2, 3, 4], "preds": [[10 * i] * 3 for i in range(5)]}
  assert r0["result"] == r1["result"] == want  # merged in index order, broadcast to both
  # Process 0 found both processes' files after the barrier, then removed them (and the folder).
  # (Second: the unshared case below, where it finds its own file only.)
  assert r0["listed"] == [
    ["items-00000-of-00002.pkl", "items-00001-of-00002.pkl"],
    ["items-00000-of-00002.pkl"],
  ]
  assert r1["listed"] == []  # only process 0 reads
  assert not r0["left"] and not r1["left"]
  # Unshared folders: process 0 names process 1's missing file; process 1 gets that message.
  missing = os.path.join(str(tmp_path), "own_0", "items-00001-of-00002.pkl")
  assert r0["error"].startswith(f"FileNotFoundError: {missing}: evaluation items of process 1")
  assert r1["error"].startswith("LeadError: evaluation failed on process 0: FileNotFoundError")
  assert "storage every process sees" in r1["error"]


def test_one_process_needs_no_files(tmp_path):
  d = str(tmp_path / ".gather")
  items = [(2, np.int64(5)), (0, np.int64(7))]
  assert eval_loop.finish(items, lambda all_items: {"got": all_items}, shard_dir=d) == {
    "got": [(0, 7), (2, 5)]
  }
  assert not os.path.exists(d)
  assert eval_loop.shard_dir("/w/eval/val") == "/w/eval/val/.gather"
