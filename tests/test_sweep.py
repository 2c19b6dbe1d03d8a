"""`python -m relations.sweep`: the plan, a local sweep interrupted and resumed (with a failing
row), the SLURM array job through launch/slurm_gpu.sbatch under the sbatch stand-in
(tests/launch/standins.py), the TPU commands, and the rows of every config.

The rows train the toy task of tests/toy_task.py for one step (tests/sweep_configs/toy.py).
"""

import io
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from relations import cli_errors
from relations import report
from relations import sweep
from relations.train import config_util
from tests.launch import standins

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOY = "tests/sweep_configs/toy.py"


def _sweep(*args):
  """The sweep CLI in its own process group (so that a test can kill it with its rows)."""
  return subprocess.Popen(
    [sys.executable, "-m", "relations.sweep", *args],
    cwd=ROOT,
    env=dict(os.environ, PYTHONPATH=ROOT),
    stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT,
    text=True,
    start_new_session=True,
  )


def _finish(p, timeout=900):
  """(exit status, output); on a timeout the sweep and its rows are killed, not left behind."""
  try:
    out, _ = p.communicate(timeout=timeout)
  except subprocess.TimeoutExpired:
    os.killpg(p.pid, signal.SIGKILL)
    p.communicate()
    raise
  return p.returncode, out


def _status(row_dir):
  return sweep.read_status(row_dir).get("status")


def _commands_in_log(row_dir):
  with open(os.path.join(row_dir, "train.log")) as f:
    return sum(line.startswith("[sweep] ") for line in f)


def test_row_dirnames_are_ordered_and_path_safe():
  assert sweep.row_dirname(3, "inputs=event_place,pg=false") == "03_inputs-event_place_pg-false"
  assert sweep.row_dirname(0, "variant=B/16,backbone=none") == "00_variant-B-16_backbone-none"
  assert sweep.row_dirname(12, "") == "12_default"


def test_unknown_hyper_lists_the_available_ones(tmp_path):
  rc, out = _finish(_sweep("--config", TOY, "--hyper", "nope", "--workdir", str(tmp_path / "w")))
  assert rc == 2
  assert f"error: {TOY}: --hyper: Unknown hyper 'nope'; available: pair, fail_then_ok" in out
  assert not (tmp_path / "w").exists()  # nothing written before the rows are checked


def test_a_row_whose_config_does_not_load_is_named_before_anything_runs(tmp_path):
  rc, out = _finish(
    _sweep("--config", TOY, "--hyper", "pair", "--workdir", str(tmp_path / "w"), "--config.sed=1")
  )
  assert rc == 2 and "hyper 'pair' row 0 ('lr=0.003')" in out
  assert "Unknown config field 'sed'" in out and not (tmp_path / "w").exists()


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_interrupted_local_sweep_resumes_where_it_stopped_and_a_failed_row_is_kept(tmp_path):
  w = str(tmp_path / "w")
  args = ("--config", TOY, "--hyper", "fail_then_ok", "--workdir", w, "--config.log_every=1")
  bad, ok = (os.path.join(w, n) for n in ("00_heads-3", "01_lr-0.001"))
  p = _sweep(*args)
  deadline = time.time() + 900
  while _status(ok) != "running":  # row 0 has failed, row 1 has started: kill the whole sweep
    assert p.poll() is None and time.time() < deadline, p.stdout.read()
    time.sleep(0.05)
  os.killpg(p.pid, signal.SIGKILL)
  p.wait(timeout=60)
  p.stdout.close()
  assert _status(bad) == "failed" and _status(ok) == "running"
  assert not os.path.exists(os.path.join(ok, "train_summary.json"))

  rc, out = _finish(_sweep(*args))
  assert rc == 1, out  # a row failed; the sweep went on and finished the other
  assert "00_heads-3: failed earlier, skipped" in out
  assert "01_lr-0.001: resuming" in out and "01_lr-0.001: done" in out
  assert _commands_in_log(bad) == 1  # not run again
  assert _commands_in_log(ok) == 2  # started, killed, resumed in the same workdir
  st = sweep.read_status(ok)
  assert st["status"] == "done" and st["wall_s"] > 0
  with open(os.path.join(ok, "train_summary.json")) as f:
    assert json.load(f)["final_step"] == 1
  with open(os.path.join(ok, "row.json")) as f:
    row = json.load(f)
  assert row["row"] == "lr=0.001" and row["spec"] == f"{TOY}:lr=0.001"
  assert row["overrides"] == ["log_every=1"] and row["labels"] == {"Row": "toy lr=0.001"}
  with open(os.path.join(ok, "config.json")) as f:
    assert json.load(f)["schedule"]["lr"] == 0.001

  # The report: the failed row names its log, the other has its steps and wall time.
  t = report.table(w)
  assert [ln["status"] for ln in t["lines"]] == [
    f"failed (exit 1; log {os.path.join(bad, 'train.log')})",
    "done",
  ]
  assert t["lines"][1]["steps"] == 1 and t["lines"][1]["wall_s"] == st["wall_s"]


def test_a_row_that_reached_its_last_step_is_done_and_rows_can_be_split(tmp_path):
  # A row stopped after its final step (and final evaluation) is not run again: a rerun would
  # restore that checkpoint and end without evaluating. No process is started here.
  w = str(tmp_path / "w")
  rows = sweep.plan(TOY, "pair", w, [])
  sweep.write_plan(rows, TOY, "pair", w, [], "local")
  for r in rows:
    with open(os.path.join(r["workdir"], "train_summary.json"), "w") as f:
      json.dump({"final_step": 1, "preempted": True}, f)
  lines = io.StringIO()
  assert sweep.run_local(rows, out=lines) == 0
  assert lines.getvalue().count("finished earlier, skipped") == 2
  assert [_status(r["workdir"]) for r in rows] == ["done", "done"]
  assert [r["index"] for r in sweep.select_rows(rows, "1")] == [1]
  assert sweep.select_rows(rows, "") == rows
  with pytest.raises(cli_errors.InputError, match=r"--rows: no row 2: the hyper has rows 0-1"):
    sweep.select_rows(rows, "0-2")


def _fake_venv(tmp_path):
  """A venv whose `python -m relations.train` records its argv and array index in
  <workdir>/argv.json (the array job is under test here, not the trainer)."""
  code = (
    "import json, os, sys\n"
    "w = sys.argv[sys.argv.index('--workdir') + 1]\n"
    "os.makedirs(w, exist_ok=True)\n"
    "json.dump({'argv': sys.argv[1:], 'task': os.environ.get('SLURM_ARRAY_TASK_ID')},"
    " open(os.path.join(w, 'argv.json'), 'w'))\n"
  )
  bin_dir = tmp_path / "venv" / "bin"
  bin_dir.mkdir(parents=True)
  (bin_dir / "python").write_text(
    "#!/usr/bin/env bash\n"
    'if [[ "$1 $2" == "-m relations.train" ]]; then shift 2; '
    f'exec {sys.executable} -S -c "$CODE" "$@"; fi\n'.replace("$CODE", code.replace('"', '\\"'))
    + f'exec {sys.executable} "$@"\n'
  )
  (bin_dir / "python").chmod(0o755)
  return str(tmp_path / "venv")


def test_slurm_array_job_runs_each_row_through_slurm_gpu_sbatch(tmp_path):
  job = 40_000 + os.getpid() % 1000
  log, state, bin_dir = (str(tmp_path / n) for n in ("log", "state", "bin"))
  standins.write(bin_dir, "sbatch", log_dir=log, state_dir=state, job_id=job)
  standins.write(bin_dir, "srun", log_dir=log, state_dir=state)
  standins.write(bin_dir, "scontrol", log_dir=log)
  env = dict(
    os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", VENV=_fake_venv(tmp_path), PYTHONPATH=ROOT
  )
  w = str(tmp_path / "w")
  args = ["--config", f"{TOY}:heads=2", "--hyper", "pair", "--workdir", w, "--launcher", "slurm"]
  dry = subprocess.run(
    [sys.executable, "-m", "relations.sweep", *args, "--dry-run", "--config.total_steps=5"],
    cwd=str(tmp_path),
    env=env,
    capture_output=True,
    text=True,
    check=True,
  )
  assert not os.path.exists(w) and standins.calls(log, "sbatch") == []
  assert "#SBATCH --array=0-1" in dry.stdout and f"sbatch {w}/sweep_array.sbatch" in dry.stdout

  # Submitted from elsewhere: the job still goes in from the repository root (SLURM_SUBMIT_DIR).
  res = subprocess.run(
    [sys.executable, "-m", "relations.sweep", *args, "--config.total_steps=5"],
    cwd=str(tmp_path),
    env=env,
    capture_output=True,
    text=True,
    check=True,
  )
  assert f"submitted array job {job} (2 tasks)" in res.stdout
  script = os.path.join(w, "sweep_array.sbatch")
  assert standins.calls(log, "sbatch") == [{"argv": [script], "cwd": ROOT}]
  # The array job keeps slurm_gpu.sbatch's own header (signal, requeue, append) and adds its own.
  directives = standins.sbatch_directives(script)
  for d in standins.sbatch_directives(os.path.join(ROOT, "launch", "slurm_gpu.sbatch")):
    if not d.startswith(("--output", "--job-name")):
      assert d in directives
  assert "--array=0-1" in directives and f"--output={w}/slurm-%A_%a.out" in directives
  for k in range(2):
    assert standins.batch_rc(standins.job_dir(state, job + k), timeout=120) == 0
  rows = ["lr=0.003", "lr=0.001"]
  for i, row in enumerate(rows):
    d = os.path.join(w, sweep.row_dirname(i, row))
    with open(os.path.join(d, "argv.json")) as f:
      got = json.load(f)
    assert got == {
      "argv": [
        "--config",
        f"{TOY}:heads=2,{row}",
        "--workdir",
        d,
        "--config.total_steps=5",
      ],
      "task": str(i),
    }
    st = sweep.read_status(d)
    assert st["status"] == "submitted" and st["job"] == str(job)
    with open(st["log"]) as f:  # slurm-%A_%a.out: the task's own log, as the status says
      text = f.read()
    assert f"sweep: array task {i} of {job}: {TOY}:heads=2,{row}" in text
    assert f"slurm_gpu.sbatch: job {job + i}, restart 0" in text
  # Each task is one srun step of slurm_gpu.sbatch, from the repository root.
  assert [c["argv"][:3] for c in standins.calls(log, "srun")] == [
    ["--kill-on-bad-exit=1", "--chdir", ROOT]
  ] * 2
  # Until a row writes its summary, the report marks it missing and names its task's log.
  t = report.table(w)
  assert t["lines"][0]["status"] == (f"missing (submitted; job {job}; log {w}/slurm-{job}_0.out)")


def test_tpu_launcher_runs_every_row_through_tpu_pod_sh(tmp_path):
  w = str(tmp_path / "w")
  res = subprocess.run(
    [sys.executable, "-m", "relations.sweep", "--config", TOY, "--hyper", "pair"]
    + ["--workdir", w, "--launcher", "tpu", "--dry-run", "--tpu-name", "pod"]
    + ["--tpu-zone", "z", "--tpu-type", "v4-8", "--bucket", "gs://b/s/"],
    cwd=ROOT,
    env=dict(os.environ, PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
    check=True,
  )
  # tpu_pod.sh --dry-run prints each command with printf %q (spaces escaped).
  lines = [ln.replace("\\ ", " ") for ln in res.stdout.splitlines()]
  # tpu_pod.sh starts each row's run detached on the workers (`tpu_worker.sh start`, #30).
  lines = [ln for ln in lines if "tpu_worker.sh start" in ln]
  assert len(lines) == 2
  for i, row in enumerate(["lr=0.003", "lr=0.001"]):
    assert f"--bucket gs://b/s/{sweep.row_dirname(i, row)}" in lines[i]
    assert f"--config {TOY}:{row}" in lines[i]
    assert "--config.data.data_dir=gs://b/s/tensorflow_datasets" in lines[i]
  missing = subprocess.run(
    [sys.executable, "-m", "relations.sweep", "--config", TOY, "--hyper", "pair"]
    + ["--workdir", w, "--launcher", "tpu", "--dry-run"],
    cwd=ROOT,
    env=dict(os.environ, PYTHONPATH=ROOT),
    capture_output=True,
    text=True,
  )
  assert missing.returncode == 2 and "--launcher tpu needs --tpu-name" in missing.stderr


@pytest.mark.parametrize(
  "config,hyper,field,values",
  [
    ("occlusion.py:tiny", "ablations", "model.hires", [True, False, True, True, True, True]),
    ("occlusion.py:tiny", "ablations", "model.orientation", [True, True, False, True, True, True]),
    (
      "occlusion.py:tiny",
      "ablations",
      "loss.boundary",
      ["attention"] * 3 + ["hed"] + ["attention"] * 2,
    ),
    ("occlusion.py:tiny", "ablations", "data.offline_16x", [False] * 5 + [True]),
    (
      "occlusion.py:B/16",
      "backbones",
      "model.backbone",
      ["augreg_b16", "dinov2_b14", "clip_b16", ""],
    ),
    (
      "video_relations.py:tiny",
      "ablations",
      "video.tracks",
      ["groundtruth", "detected"] + ["both"] * 4,
    ),
    ("video_relations.py:tiny", "ablations", "video.segment_length", [12, 12, 15, 60, 12, 12]),
    (
      "video_relations.py:tiny",
      "ablations",
      "video.association_threshold",
      [0.5] * 4 + [1.01, 0.5],
    ),
    ("video_relations.py:tiny", "ablations", "model.use_motion", [True] * 5 + [False]),
  ],
)
def test_every_config_row_loads_and_sets_its_field(config, hyper, field, values):
  path, _, base = config.partition(":")
  path = os.path.join(ROOT, "configs", path)
  rows = sweep.hyper_rows(path, hyper)
  got = []
  for row in rows:
    c = config_util.load_config(f"{path}:{base},{row}")
    for part in field.split("."):
      c = c[part]
    got.append(c)
  assert got == values
  assert all(sweep.describe(path, r) for r in rows)  # every row has its label
