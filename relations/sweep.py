"""`python -m relations.sweep --config configs/X.py[:ARG] --hyper NAME --workdir W [...]`.

Runs the rows of a config's ablation (`get_hyper(NAME)` in the config file: a list of config arg
strings such as `inputs=image,pg=true`) as one training run each, with the shared trainer:

  W/sweep.json              the config, hyper name, overrides and rows in their order
  W/<NN>_<row>/row.json     the row: its index, arg string, full config spec, overrides
  W/<NN>_<row>/config.json  the resolved config (the trainer rewrites the same content)
  W/<NN>_<row>/status.json  running | done | failed | interrupted | submitted, wall time, log
  W/<NN>_<row>/train.log    the run's output (local and tpu launchers)

Each row's config is `configs/X.py:ARG,ROW` (the row's keys override ARG's), so the same list
gives a tiny sweep (`:tiny`) and a paper one (`:small`); `--config.field=value` overrides apply to
every row. Every row's config is loaded and checked before anything runs.

Launchers:
  local  rows one after another in this machine's subprocesses. Restarting the same command
         resumes: finished rows are skipped, an interrupted row resumes from its last checkpoint,
         failed rows stay failed (`--retry-failed` runs them again). A failing row is marked
         failed with its log and the sweep goes on; the exit status is then 1. SIGTERM/SIGINT
         stop the running row (the trainer saves a checkpoint) and the sweep (exit 143).
  slurm  one SLURM array job, one task per row, each task running launch/slurm_gpu.sbatch (srun,
         time-limit requeue) on its row; the job script (W/sweep_array.sbatch, whose #SBATCH
         lines are slurm_gpu.sbatch's plus --array and --output=W/slurm-%A_%a.out) is written
         and submitted from the repository root. `--dry-run` prints it and the sbatch command.
  tpu    rows one after another on one Cloud TPU VM pod through launch/tpu_pod.sh (--tpu-name,
         --tpu-zone, --tpu-type, --bucket); row r trains in BUCKET/<row>/workdir and every row
         reads the TFDS data in BUCKET/tensorflow_datasets. `--dry-run` prints the commands.

`python -m relations.report W` collects the finished rows into the paper's table.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time

from relations import cli_errors
from relations import io_util

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SBATCH = os.path.join("launch", "slurm_gpu.sbatch")
TPU_POD = os.path.join("launch", "tpu_pod.sh")
SWEEP_FILE = "sweep.json"
FINAL = ("done", "failed")


# ------------------------------------------------------------------------------------ the plan
def row_dirname(index: int, row: str) -> str:
  """`03_inputs-event_place_pg-false`: the row's position, then its arg string made path-safe."""
  body = re.sub(r"[^A-Za-z0-9._-]+", "-", row.replace(",", "_").replace("=", "-")).strip("-_")
  return f"{index:02d}_{body or 'default'}"


def _split_spec(spec: str) -> tuple[str, str]:
  path, _, arg = spec.partition(":")
  return path, arg


def _resolve_config_path(path: str) -> str:
  if not os.path.exists(path) and os.path.exists(os.path.join(ROOT, path)):
    return os.path.join(ROOT, path)
  return path


def hyper_rows(config_path: str, name: str) -> list[str]:
  """The config file's `get_hyper(name)` rows.

  Raises:
    cli_errors.InputError: no such file, no get_hyper, an unknown hyper name (the config's
      message lists the available ones), or rows that are not a non-empty list of strings.
  """
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  path = _resolve_config_path(config_path)
  if not os.path.exists(path):
    raise cli_errors.InputError("no such config file", file=config_path)
  try:
    module = config_util._load_module(path)  # pylint: disable=protected-access
  except ValueError as e:
    raise cli_errors.InputError(str(e)) from None
  if not callable(getattr(module, "get_hyper", None)):
    raise cli_errors.InputError("defines no get_hyper(name); nothing to sweep", file=config_path)
  try:
    rows = module.get_hyper(name)
  except ValueError as e:
    raise cli_errors.InputError(str(e), file=config_path, field="--hyper") from None
  if not isinstance(rows, (list, tuple)) or not rows or not all(isinstance(r, str) for r in rows):
    raise cli_errors.InputError(
      f"get_hyper({name!r}) returned {rows!r}; expected a non-empty list of config arg strings",
      file=config_path,
    )
  return list(rows)


def describe(config_path: str, row: str) -> dict:
  """The config's `describe_row(row)` label columns ({} when the config has none)."""
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  module = config_util._load_module(_resolve_config_path(config_path))  # pylint: disable=protected-access
  fn = getattr(module, "describe_row", None)
  return dict(fn(row)) if callable(fn) else {}


def plan(config: str, hyper: str, workdir: str, overrides) -> list[dict]:
  """Loads and checks every row's config; returns the rows (dicts as saved in row.json).

  Raises:
    cli_errors.InputError: naming the row whose config does not load.
  """
  from relations.train import cli  # pylint: disable=g-import-not-at-top

  path, base = _split_spec(config)
  rows = hyper_rows(path, hyper)
  out = []
  seen = set()
  for i, row in enumerate(rows):
    spec = f"{path}:{','.join(a for a in (base, row) if a)}"
    try:
      cfg = cli.load_checked_config(spec, overrides)
    except cli_errors.InputError as e:
      raise cli_errors.InputError(
        e.message, file=e.file, record=f"hyper {hyper!r} row {i} ({row!r})", field=e.field
      ) from None
    name = row_dirname(i, row)
    if name in seen:
      raise cli_errors.InputError(f"row {i} ({row!r}) repeats an earlier row", file=path)
    seen.add(name)
    out.append(
      {
        "index": i,
        "name": name,
        "row": row,
        "hyper": hyper,
        "spec": spec,
        "overrides": list(overrides),
        "workdir": os.path.join(workdir, name),
        "labels": describe(path, row),
        "_config": cfg,
      }
    )
  return out


def write_plan(rows: list[dict], config: str, hyper: str, workdir: str, overrides, launcher: str):
  """W/sweep.json, and row.json + config.json in each row's workdir (atomic writes)."""
  os.makedirs(workdir, exist_ok=True)
  for r in rows:
    os.makedirs(r["workdir"], exist_ok=True)
    io_util.write_json_atomic(
      os.path.join(r["workdir"], "row.json"),
      {k: v for k, v in r.items() if k != "_config"},
      indent=1,
    )
    io_util.write_text_atomic(
      os.path.join(r["workdir"], "config.json"), r["_config"].to_json_best_effort(indent=2)
    )
  io_util.write_json_atomic(
    os.path.join(workdir, SWEEP_FILE),
    {
      "config": config,
      "hyper": hyper,
      "overrides": list(overrides),
      "launcher": launcher,
      "rows": [r["name"] for r in rows],
    },
    indent=1,
  )


def read_status(row_dir: str) -> dict:
  path = os.path.join(row_dir, "status.json")
  if not os.path.exists(path):
    return {}
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return {}


def _set_status(row_dir: str, **fields) -> dict:
  status = {**read_status(row_dir), **fields}
  io_util.write_json_atomic(os.path.join(row_dir, "status.json"), status, indent=1)
  return status


# ------------------------------------------------------------------------------------ local
class _Stop:
  """SIGTERM/SIGINT: forwarded to the running row, then the sweep stops after it."""

  def __init__(self):
    self.signum = None
    self.child = None

  def __enter__(self):
    self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
    return self

  def __exit__(self, *exc):
    for s, h in self._old.items():
      signal.signal(s, h)

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    self.signum = signum
    if self.child is not None and self.child.poll() is None:
      # SIGTERM in both cases: the trainer saves a checkpoint after the current step.
      self.child.send_signal(signal.SIGTERM)


def _read_summary(row_dir: str) -> dict:
  try:
    with open(os.path.join(row_dir, "train_summary.json")) as f:
      return json.load(f)
  except (OSError, ValueError):
    return {}


def _alive(pid) -> bool:
  """Whether another live process (a second sweep on the same workdir) runs the row."""
  if not isinstance(pid, int) or pid == os.getpid():
    return False
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    return True
  return True


def select_rows(rows: list[dict], spec: str) -> list[dict]:
  """`--rows 0-7,12`: the rows with those indices, in order."""
  if not spec:
    return rows
  want = set()
  try:
    for part in spec.split(","):
      lo, _, hi = part.strip().partition("-")
      want.update(range(int(lo), int(hi or lo) + 1))
  except ValueError:
    raise cli_errors.InputError(
      f"expected indices such as 0-7,12, got {spec!r}", field="--rows"
    ) from None
  bad = sorted(i for i in want if not 0 <= i < len(rows))
  if bad:
    raise cli_errors.InputError(
      f"no row {bad[0]}: the hyper has rows 0-{len(rows) - 1}", field="--rows"
    )
  return [r for r in rows if r["index"] in want]


def train_command(r: dict) -> list[str]:
  return [
    sys.executable,
    "-m",
    "relations.train",
    "--config",
    r["spec"],
    "--workdir",
    r["workdir"],
    *[f"--config.{o}" for o in r["overrides"]],
  ]


def run_local(rows: list[dict], retry_failed: bool = False, out=sys.stdout) -> int:
  """Runs the rows in order (see the module docstring); returns the exit status."""
  failed = 0
  with _Stop() as stop:
    for r in rows:
      d = r["workdir"]
      st = read_status(d)
      if st.get("status") == "done" or (st.get("status") == "failed" and not retry_failed):
        print(f"[sweep] {r['name']}: {st['status']} earlier, skipped", file=out, flush=True)
        failed += st["status"] == "failed"
        continue
      if stop.signum is not None:
        break
      summary = _read_summary(d)
      if summary and int(summary.get("final_step", -1)) >= int(r["_config"].total_steps):
        # Stopped after its last step (and its final evaluation, which runs before the stop):
        # a rerun would restore the last checkpoint and end without evaluating again.
        _set_status(d, status="done", returncode=0)
        print(f"[sweep] {r['name']}: finished earlier, skipped", file=out, flush=True)
        continue
      if st.get("status") == "running" and _alive(st.get("pid")):
        print(f"[sweep] {r['name']}: running in process {st['pid']}, skipped", file=out, flush=True)
        continue
      log = os.path.join(d, "train.log")
      resumed = st.get("status") in ("running", "interrupted", "failed")
      print(
        f"[sweep] {r['name']}: {'resuming' if resumed else 'starting'} (log {log})",
        file=out,
        flush=True,
      )
      wall = float(st.get("wall_s", 0.0))
      _set_status(d, status="running", log=log, pid=os.getpid(), started=time.time())
      t0 = time.perf_counter()
      with open(log, "a") as f:
        f.write(f"[sweep] {' '.join(shlex.quote(a) for a in train_command(r))}\n")
        f.flush()
        stop.child = subprocess.Popen(
          train_command(r), stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        rc = stop.child.wait()
        stop.child = None
      wall += time.perf_counter() - t0
      if rc == 0:
        _set_status(d, status="done", returncode=0, wall_s=wall)
        print(f"[sweep] {r['name']}: done in {wall:.0f} s", file=out, flush=True)
      elif stop.signum is not None or rc == 143:
        _set_status(d, status="interrupted", returncode=rc, wall_s=wall)
        print(f"[sweep] {r['name']}: interrupted; run again to resume", file=out, flush=True)
        return 143
      else:
        failed += 1
        _set_status(d, status="failed", returncode=rc, wall_s=wall)
        print(f"[sweep] {r['name']}: FAILED (exit {rc}); log {log}", file=out, flush=True)
  if stop.signum is not None:
    return 143
  if failed:
    print(f"[sweep] {failed} of {len(rows)} rows failed", file=out, flush=True)
  return 1 if failed else 0


# ------------------------------------------------------------------------------------ slurm
def sbatch_directives(path: str) -> list[str]:
  """The #SBATCH lines of a batch script (up to its first command), without the prefix."""
  out = []
  with open(path) as f:
    for line in f.read().splitlines()[1:]:
      s = line.strip()
      if s.startswith("#SBATCH"):
        out.append(s[len("#SBATCH") :].strip())
      elif s and not s.startswith("#"):
        break
  return out


def slurm_script(rows: list[dict], workdir: str, hyper: str) -> str:
  """The array job: task i runs launch/slurm_gpu.sbatch on row i."""
  keep = [
    d
    for d in sbatch_directives(os.path.join(ROOT, SBATCH))
    if not d.startswith(("--output", "--job-name", "--array", "-o ", "-J "))
  ]
  out_pattern = os.path.join(os.path.abspath(workdir), "slurm-%A_%a.out")
  lines = ["#!/usr/bin/env bash", f"# Written by python -m relations.sweep; {len(rows)} rows."]
  lines += [f"#SBATCH {d}" for d in keep]
  lines += [
    f"#SBATCH --job-name=sweep-{re.sub(r'[^A-Za-z0-9_-]+', '-', hyper)}",
    f"#SBATCH --output={out_pattern}",
    f"#SBATCH --array=0-{len(rows) - 1}",
    "set -euo pipefail",
    "configs=(",
    *[f"  {shlex.quote(r['spec'])}" for r in rows],
    ")",
    "workdirs=(",
    *[f"  {shlex.quote(os.path.abspath(r['workdir']))}" for r in rows],
    ")",
    'i="${SLURM_ARRAY_TASK_ID:?not an array task: submit this script with sbatch}"',
    'root="${RELATIONS_ROOT:-${SLURM_SUBMIT_DIR:?submit from the repository root}}"',
    'echo "sweep: array task $i of ${SLURM_ARRAY_JOB_ID:-?}: ${configs[$i]}"',
    f'exec bash "$root/{SBATCH}" "${{configs[$i]}}" "${{workdirs[$i]}}"'
    + "".join(f" {shlex.quote('--config.' + o)}" for o in rows[0]["overrides"]),
  ]
  return "\n".join(lines) + "\n"


def run_slurm(rows, workdir, hyper, dry_run: bool, out=sys.stdout) -> int:
  script = slurm_script(rows, workdir, hyper)
  path = os.path.join(os.path.abspath(workdir), "sweep_array.sbatch")
  cmd = ["sbatch", path]
  if dry_run:
    print(script, file=out)
    print(f"# from {ROOT}:\n{shlex.join(cmd)}", file=out, flush=True)
    return 0
  io_util.write_text_atomic(path, script)
  os.chmod(path, 0o755)
  try:
    res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
  except FileNotFoundError:
    raise cli_errors.InputError("sbatch: not found on PATH (run on a SLURM login node)") from None
  sys.stderr.write(res.stderr)
  if res.returncode:
    print(f"[sweep] sbatch failed (exit {res.returncode}): {res.stdout.strip()}", file=out)
    return res.returncode
  m = re.search(r"Submitted batch job (\d+)", res.stdout)
  job = m.group(1) if m else "?"
  for k, r in enumerate(rows):  # array index k runs rows[k]
    log = os.path.join(os.path.abspath(workdir), f"slurm-{job}_{k}.out")
    _set_status(r["workdir"], status="submitted", job=job, log=log)
  print(f"[sweep] submitted array job {job} ({len(rows)} tasks): {path}", file=out, flush=True)
  return 0


# ------------------------------------------------------------------------------------ tpu
def tpu_commands(rows, tpu_name, zone, tpu_type, bucket) -> list[list[str]]:
  bucket = bucket.rstrip("/")
  return [
    [
      "bash",
      os.path.join(ROOT, TPU_POD),
      "--name",
      tpu_name,
      "--zone",
      zone,
      "--type",
      tpu_type,
      "--bucket",
      f"{bucket}/{r['name']}",
      "--config",
      r["spec"],
      "--",
      *[f"--config.{o}" for o in r["overrides"]],
      f"--config.data.data_dir={bucket}/tensorflow_datasets",
    ]
    for r in rows
  ]


def run_tpu(rows, args, out=sys.stdout) -> int:
  for flag in ("tpu_name", "tpu_zone", "tpu_type", "bucket"):
    if not getattr(args, flag):
      raise cli_errors.InputError(f"--launcher tpu needs --{flag.replace('_', '-')}")
  cmds = tpu_commands(rows, args.tpu_name, args.tpu_zone, args.tpu_type, args.bucket)
  failed = 0
  for r, cmd in zip(rows, cmds):
    if args.dry_run:
      subprocess.run([*cmd[:2], "--dry-run", *cmd[2:]], cwd=ROOT, stdout=out, check=False)
      continue
    st = read_status(r["workdir"])
    if st.get("status") == "done" or (st.get("status") == "failed" and not args.retry_failed):
      continue
    log = os.path.join(r["workdir"], "train.log")
    _set_status(r["workdir"], status="running", log=log, remote=f"{args.bucket}/{r['name']}")
    t0 = time.perf_counter()
    with open(log, "a") as f:
      rc = subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT, check=False).returncode
    wall = float(st.get("wall_s", 0.0)) + time.perf_counter() - t0
    status = "done" if rc == 0 else "interrupted" if rc == 143 else "failed"
    failed += status == "failed"
    _set_status(r["workdir"], status=status, returncode=rc, wall_s=wall)
    print(f"[sweep] {r['name']}: {status} (exit {rc}); log {log}", file=out, flush=True)
  return 1 if failed else 0


# ------------------------------------------------------------------------------------ CLI
def build_parser():
  p = cli_errors.ArgumentParser(
    prog="python -m relations.sweep",
    description="Run a config's ablation rows (get_hyper) as one training run each.",
  )
  p.add_argument("--config", required=True, help="configs/x.py[:arg], the arg every row extends")
  p.add_argument("--hyper", required=True, help="the config's get_hyper name, e.g. table2")
  p.add_argument("--workdir", required=True, help="one workdir per row goes under it")
  p.add_argument("--launcher", choices=("local", "slurm", "tpu"), default="local")
  p.add_argument("--dry-run", action="store_true", help="print what would be run or submitted")
  p.add_argument("--retry-failed", action="store_true", help="run failed rows again")
  p.add_argument(
    "--rows",
    default="",
    help="only these row indices, e.g. 0-7,12 (two local sweeps on one workdir share the rows)",
  )
  p.add_argument("--tpu-name", default="", help="tpu: TPU VM name")
  p.add_argument("--tpu-zone", default="", help="tpu: zone, e.g. us-central2-b")
  p.add_argument("--tpu-type", default="", help="tpu: accelerator type, e.g. v4-32")
  p.add_argument("--bucket", default="", help="tpu: gs://BUCKET/PATH for the rows' workdirs")
  return p


@cli_errors.entry_point
def main(argv=None) -> int:
  argv = list(sys.argv[1:] if argv is None else argv)
  overrides = [a[len("--config.") :] for a in argv if a.startswith("--config.")]
  args = build_parser().parse_args([a for a in argv if not a.startswith("--config.")])
  for o in overrides:
    if "=" not in o:
      raise cli_errors.InputError(f"--config.{o} needs a value (--config.field=value)")
  cli_errors.check_output_dir(args.workdir)
  workdir = os.path.abspath(args.workdir)
  rows = plan(args.config, args.hyper, workdir, overrides)
  selected = select_rows(rows, args.rows)
  if not args.dry_run:
    write_plan(rows, args.config, args.hyper, workdir, overrides, args.launcher)
  rows = selected
  if args.dry_run and args.launcher == "local":
    for r in rows:
      print(shlex.join(train_command(r)))
    return 0
  if args.launcher == "local":
    return run_local(rows, args.retry_failed)
  if args.launcher == "slurm":
    return run_slurm(rows, workdir, args.hyper, args.dry_run)
  return run_tpu(rows, args)


if __name__ == "__main__":
  sys.exit(main())
