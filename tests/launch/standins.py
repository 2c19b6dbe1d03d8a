"""Stand-ins for the cloud and cluster tools the launch scripts call, for tests.

`write(bin_dir, name, **config)` writes an executable called `name` (gcloud, sbatch, srun,
scontrol; and on the fake TPU worker python3, uv) that appends each call to
`<log_dir>/<name>.jsonl` ({"argv": [...], "cwd": ...}) and then does, here, the part of the real
tool's job that the launch scripts depend on:

- gcloud compute tpus tpu-vm: `create`/`delete` only record; `scp` copies into the fake worker's
  home; `ssh --command C` runs `bash -c C` in the fake worker's home with the worker's environment
  (HOME, PATH and what the test says the pod runtime provides), not the caller's, as ssh would.
  There is one fake worker, so `--worker=all` runs the command once.
- python3 (worker): `-m pip install --user uv==V` writes the uv stand-in into the user base;
  `-m venv [--clear] PATH` makes a real venv (this machine's Python) holding the pip stand-in;
  everything else runs the real interpreter, which says it is `image_version` (e.g. "3.10", the
  TPU VM image's) when the test gives one.
- uv: `--version`; `venv --python 3.11 [--seed] [--clear] PATH` makes a real venv with this
  machine's Python 3.11 (refusing other versions, as uv would without a download for them) and,
  with --seed, puts the pip stand-in in it.
- pip (module in the venv): `install -c FILE -e DIR[extras]` records the flags, checks the files
  exist, and "installs" by linking: a .pth that puts DIR on sys.path (what an editable install
  does) and adds the site-packages of an environment already installed with the same
  constraints (the test runner's own). No download, no resolution.
- sbatch: copies the script to a spool directory (SLURM runs a copy, not the submitted file),
  honours --output/--open-mode from its #SBATCH lines, and starts it in the background with the
  submitting environment plus SLURM_JOB_ID, SLURM_SUBMIT_DIR, SLURM_RESTART_COUNT. An --array
  job becomes one job per index (SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID; %A/%a in --output),
  run one after another.
- srun: runs the command as one task here (cwd from --chdir, SLURM_* step variables set so that
  jax.distributed's SLURM detection works), records the task's pid, returns its exit code (128 +
  signal if killed). Like real srun (src/srun/signals.c), a SIGTERM/SIGHUP/SIGQUIT sent to srun
  itself SIGKILLs the tasks, and other signals are forwarded.
- scontrol: `requeue ID` is recorded only; the test starts the requeued run (`restart`).

Not emulated, so not tested here: Google Cloud itself (pod creation, ssh and scp to several
workers at once and how gcloud combines their exit codes, the TPU VM image and its python3/pip,
uv's CPython download, PyPI, libtpu and TPU devices, jax.distributed discovering a pod from the
TPU metadata); SLURM's scheduler (the real timing of --signal, KillWait, several nodes and tasks,
srun --kill-on-bad-exit across nodes, what a requeued job waits for before it starts again, and
sbatch options given as two words such as `--nodes 2`).

This module imports only the standard library: the stand-ins run it with `python -S`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------- writing stand-ins


def write(bin_dir: str, name: str, python: str = sys.executable, **config) -> str:
  """Writes the stand-in `name` into `bin_dir`; returns its path."""
  os.makedirs(bin_dir, exist_ok=True)
  path = os.path.join(bin_dir, name)
  with open(path, "w") as f:
    f.write(
      f"#!{python} -S\nimport sys\nsys.path.insert(0, {HERE!r})\nimport standins\n"
      f"sys.exit(standins.MAIN[{name!r}]({json.dumps(config)!r}))\n"
    )
  os.chmod(path, 0o755)
  return path


def calls(log_dir: str, name: str) -> list[dict]:
  """The recorded calls of stand-in `name`, oldest first."""
  path = os.path.join(log_dir, f"{name}.jsonl")
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def _log(log_dir: str, name: str, **fields) -> None:
  os.makedirs(log_dir, exist_ok=True)
  with open(os.path.join(log_dir, f"{name}.jsonl"), "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), **fields}) + "\n")


def _options(argv, with_value):
  """Splits argv into ({option: value}, [positional]); `with_value` options take the next word."""
  opts, pos = {}, []
  i = 0
  while i < len(argv):
    a = argv[i]
    if a in with_value:
      opts[a] = argv[i + 1]
      i += 2
      continue
    if a.startswith("-"):
      key, _, value = a.partition("=")
      opts[key] = value
    else:
      pos.append(a)
    i += 1
  return opts, pos


# ------------------------------------------------------------------------------------ TPU side


def _gcloud(config: str) -> int:
  cfg = json.loads(config)
  argv = sys.argv[1:]
  _log(cfg["log_dir"], "gcloud")
  if argv[:3] != ["compute", "tpus", "tpu-vm"] or len(argv) < 4:
    print(f"gcloud stand-in: unsupported command {argv}", file=sys.stderr)
    return 2
  verb = argv[3]
  opts, pos = _options(argv[4:], {"--zone", "--command", "--accelerator-type", "--version"})
  home = cfg["worker_home"]
  if verb in ("create", "delete"):
    return 0
  if verb == "scp":
    src, dest = pos
    dest = dest.split(":", 1)[1].removeprefix("~/")
    shutil.copyfile(src, os.path.join(home, dest))
    return 0
  if verb == "ssh":
    env = {
      "HOME": home,
      "PATH": cfg["worker_path"],
      "USER": "worker",
      "LANG": "C.UTF-8",
      **cfg["worker_env"],
    }
    return subprocess.run(
      ["bash", "-c", opts["--command"]], cwd=home, env=env, check=False
    ).returncode
  print(f"gcloud stand-in: unsupported verb {verb}", file=sys.stderr)
  return 2


def _python3(config: str) -> int:
  cfg = json.loads(config)
  argv = sys.argv[1:]
  if argv[:2] == ["-m", "venv"]:
    _log(cfg["log_dir"], "python3")
    opts, pos = _options(argv[2:], set())
    if cfg.get("image_version"):
      print("python3 stand-in: the image's python3 is too old for this call", file=sys.stderr)
      return 1
    (path,) = pos
    _make_venv(cfg["real_python"], path, "--clear" in opts, cfg, cfg.get("pip_mode", ""))
    return 0
  if argv[:2] != ["-m", "pip"]:
    if cfg.get("image_version") and argv[:1] == ["-c"]:
      major, minor = (int(x) for x in cfg["image_version"].split("."))
      fake = f"import sys; sys.version_info = ({major}, {minor}, 0, 'final', 0)\n"
      argv = ["-c", fake + argv[1], *argv[2:]]
    os.execv(cfg["real_python"], [cfg["real_python"], *argv])
  _log(cfg["log_dir"], "python3")
  if argv[2:] == ["--version"]:
    print("pip 22.0.2 from /usr/lib/python3/dist-packages/pip (python 3.10) (stand-in)")
    return 0
  opts, pos = _options(argv[3:], set())
  if argv[2] != "install" or "--user" not in opts or len(pos) != 1 or not pos[0].startswith("uv=="):
    print(f"python3 stand-in: unsupported pip call {argv[2:]}", file=sys.stderr)
    return 2
  import site  # pylint: disable=g-import-not-at-top  (not imported under -S)

  write(
    os.path.join(site.getuserbase(), "bin"),
    "uv",
    python=cfg["real_python"],
    log_dir=cfg["log_dir"],
    version=pos[0][len("uv==") :],
    real_python=cfg["real_python"],
    link_site_packages=cfg["link_site_packages"],
    mode=cfg.get("uv_mode", ""),
    pip_mode=cfg.get("pip_mode", ""),
  )
  return 0


def _uv(config: str) -> int:
  cfg = json.loads(config)
  argv = sys.argv[1:]
  _log(cfg["log_dir"], "uv")
  if argv == ["--version"]:
    print(f"uv {cfg['version']} (stand-in)")
    return 0
  if argv[:1] != ["venv"]:
    print(f"uv stand-in: unsupported command {argv}", file=sys.stderr)
    return 2
  opts, pos = _options(argv[1:], {"--python", "-p"})
  want = opts.get("--python", opts.get("-p", ""))
  have = subprocess.run(
    [cfg["real_python"], "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
    capture_output=True,
    text=True,
    check=True,
  ).stdout.strip()
  if cfg["mode"] == "no_python" or want != have:
    print(f"error: No download found for request: cpython-{want}-linux-x86_64-gnu", file=sys.stderr)
    return 2
  (path,) = pos
  _make_venv(
    cfg["real_python"], path, "--clear" in opts, cfg if "--seed" in opts else None, cfg["pip_mode"]
  )
  return 0


def _make_venv(real_python, path, clear, cfg, pip_mode) -> None:
  """A real venv of `real_python` at `path`; with `cfg`, the pip stand-in inside it."""
  cmd = [real_python, "-m", "venv", "--without-pip", *(["--clear"] if clear else []), path]
  subprocess.run(cmd, check=True)
  if cfg is None:
    return
  have = subprocess.run(
    [real_python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
    capture_output=True,
    text=True,
    check=True,
  ).stdout.strip()
  site_dir = os.path.join(path, "lib", f"python{have}", "site-packages")
  os.makedirs(os.path.join(site_dir, "pip"))
  with open(os.path.join(site_dir, "pip", "__init__.py"), "w"):
    pass
  with open(os.path.join(site_dir, "pip", "__main__.py"), "w") as f:
    cfg_pip = {
      "log_dir": cfg["log_dir"],
      "link_site_packages": cfg["link_site_packages"],
      "mode": pip_mode,
    }
    f.write(
      f"import sys\nsys.path.insert(0, {HERE!r})\nimport standins\n"
      f"sys.exit(standins.pip_main({json.dumps(cfg_pip)!r}))\n"
    )


def pip_main(config: str) -> int:
  """The pip stand-in (`python -m pip` inside a venv the uv stand-in made)."""
  import sysconfig  # pylint: disable=g-import-not-at-top

  cfg = json.loads(config)
  argv = sys.argv[1:]
  _log(cfg["log_dir"], "pip", prefix=sys.prefix)
  opts, pos = _options(argv[1:], {"-c", "--constraint", "-e", "--editable"})
  if argv[:1] != ["install"] or pos:
    print(f"pip stand-in: unsupported call {argv}", file=sys.stderr)
    return 2
  constraints = opts.get("-c", opts.get("--constraint"))
  if not constraints or not os.path.isfile(constraints):
    print(f"pip stand-in: constraints file {constraints!r} not found", file=sys.stderr)
    return 1
  target = (opts.get("-e") or opts.get("--editable") or "").split("[", 1)[0]
  if not os.path.isfile(os.path.join(target, "pyproject.toml")):
    print(f"pip stand-in: {target!r} has no pyproject.toml", file=sys.stderr)
    return 1
  site_dir = sysconfig.get_paths()["purelib"]
  with open(os.path.join(site_dir, "_standin_install.pth"), "w") as f:
    f.write(
      f"{os.path.abspath(target)}\nimport site; site.addsitedir({cfg['link_site_packages']!r})\n"
    )
  if cfg["mode"] == "wrong_numpy":  # an install that ignored the constraints
    meta = os.path.join(site_dir, "numpy-2.3.0.dist-info")
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, "METADATA"), "w") as f:
      f.write("Metadata-Version: 2.1\nName: numpy\nVersion: 2.3.0\n")
  return 0


# ---------------------------------------------------------------------------------- SLURM side


def _job_dir(state_dir: str, job_id) -> str:
  return os.path.join(state_dir, f"job{job_id}")


def sbatch_directives(script: str) -> list[str]:
  """The #SBATCH options of a batch script (sbatch stops reading them at the first command)."""
  out = []
  with open(script) as f:
    for line in f.read().splitlines()[1:]:
      s = line.strip()
      if s.startswith("#SBATCH"):
        out.append(s[len("#SBATCH") :].strip())
      elif s and not s.startswith("#"):
        break
  return out


def _sbatch(config: str) -> int:
  cfg = json.loads(config)
  argv = sys.argv[1:]
  state = cfg["state_dir"]
  _log(cfg["log_dir"], "sbatch")
  i = 0
  while i < len(argv) and argv[i].startswith("-"):
    i += 1
  script, args = argv[i], argv[i + 1 :]
  directives = dict(d.split("=", 1) if "=" in d else (d, "") for d in sbatch_directives(script))
  for a in argv[:i]:  # command-line options override the script's
    k, _, v = a.partition("=")
    directives[k] = v
  job_id = cfg["job_id"]
  if "--array" in directives:
    return _sbatch_array(cfg, script, args, directives)
  job_dir = _job_dir(state, job_id)
  os.makedirs(job_dir)
  spool = os.path.join(job_dir, "slurm_script")
  shutil.copyfile(script, spool)
  os.chmod(spool, 0o755)
  out = directives.get("--output", "slurm-%j.out").replace("%j", str(job_id))
  job = {
    "job_id": job_id,
    "script": spool,
    "args": args,
    "submit_dir": os.getcwd(),
    "output": os.path.join(os.getcwd(), out),
    "append": directives.get("--open-mode") == "append",
    "restart_count": 0,
    "directives": directives,
    "env": dict(os.environ),
  }
  with open(os.path.join(job_dir, "job.json"), "w") as f:
    json.dump(job, f)
  _spawn_batch(job_dir)
  print(f"Submitted batch job {job_id}")
  return 0


def _array_indices(spec: str) -> list[int]:
  """`0-3`, `0,2,5-6`, with an optional `%N` throttle (ignored: tasks run one after another)."""
  out = []
  for part in spec.split("%", 1)[0].split(","):
    lo, _, hi = part.partition("-")
    out += list(range(int(lo), int(hi or lo) + 1))
  return out


def _sbatch_array(cfg, script, args, directives) -> int:
  """An array job: task k (index i) is job `job_id + k` with SLURM_ARRAY_JOB_ID=job_id and
  SLURM_ARRAY_TASK_ID=i, as SLURM numbers them; its output name expands %A, %a and %j. The tasks
  run one after another in one background runner."""
  job_id = cfg["job_id"]
  dirs = []
  for k, index in enumerate(_array_indices(directives["--array"])):
    task_id = job_id + k
    job_dir = _job_dir(cfg["state_dir"], task_id)
    os.makedirs(job_dir)
    spool = os.path.join(job_dir, "slurm_script")
    shutil.copyfile(script, spool)
    os.chmod(spool, 0o755)
    out = directives.get("--output", "slurm-%A_%a.out")
    out = out.replace("%A", str(job_id)).replace("%a", str(index)).replace("%j", str(task_id))
    env = dict(os.environ, SLURM_ARRAY_JOB_ID=str(job_id), SLURM_ARRAY_TASK_ID=str(index))
    job = {
      "job_id": task_id,
      "script": spool,
      "args": args,
      "submit_dir": os.getcwd(),
      "output": os.path.join(os.getcwd(), out),
      "append": directives.get("--open-mode") == "append",
      "restart_count": 0,
      "directives": directives,
      "env": env,
    }
    with open(os.path.join(job_dir, "job.json"), "w") as f:
      json.dump(job, f)
    dirs.append(job_dir)
  subprocess.Popen(
    [sys.executable, "-S", os.path.abspath(__file__), "run-array", *dirs],
    start_new_session=True,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )
  print(f"Submitted batch job {job_id}")
  return 0


def _spawn_batch(job_dir: str) -> None:
  subprocess.Popen(
    [sys.executable, "-S", os.path.abspath(__file__), "run-batch", job_dir],
    start_new_session=True,
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
  )


def _run_batch(job_dir: str) -> None:
  """Runs a job's batch script like slurmstepd would; records its pid and exit status."""
  with open(os.path.join(job_dir, "job.json")) as f:
    job = json.load(f)
  env = dict(job["env"])
  env.update(
    SLURM_JOB_ID=str(job["job_id"]),
    SLURM_SUBMIT_DIR=job["submit_dir"],
    SLURM_JOB_NODELIST="localhost",
    SLURM_NNODES="1",
  )
  if job["restart_count"]:
    env["SLURM_RESTART_COUNT"] = str(job["restart_count"])
  with open(job["output"], "a" if job["append"] else "w") as out:
    proc = subprocess.Popen(
      ["bash", job["script"], *job["args"]],
      cwd=job["submit_dir"],
      env=env,
      stdin=subprocess.DEVNULL,
      stdout=out,
      stderr=subprocess.STDOUT,
    )
    _write(os.path.join(job_dir, "batch.pid"), str(proc.pid))
    rc = proc.wait()
  _write(os.path.join(job_dir, "batch.rc"), str(128 - rc if rc < 0 else rc))


def _write(path: str, text: str) -> None:
  with open(path + ".tmp", "w") as f:
    f.write(text)
  os.replace(path + ".tmp", path)


def _srun(config: str) -> int:
  cfg = json.loads(config)
  argv = sys.argv[1:]
  _log(cfg["log_dir"], "srun")
  i, chdir = 0, os.getcwd()
  while i < len(argv) and argv[i].startswith("-"):
    if argv[i] in ("--chdir", "-D"):
      chdir = argv[i + 1]
      i += 1
    elif argv[i].startswith("--chdir="):
      chdir = argv[i].split("=", 1)[1]
    i += 1
  cmd = argv[i:]
  job_dir = _job_dir(cfg["state_dir"], os.environ["SLURM_JOB_ID"])
  env = dict(os.environ)
  env.update(
    SLURM_STEP_ID="0",
    SLURM_STEP_NODELIST="localhost",
    SLURM_STEP_NUM_NODES="1",
    SLURM_NTASKS="1",
    SLURM_PROCID="0",
    SLURM_LOCALID="0",
    SLURM_NODEID="0",
  )
  task = subprocess.Popen(cmd, cwd=chdir, env=env)
  with open(os.path.join(job_dir, "tasks"), "a") as f:
    f.write(f"{task.pid}\n")
  with open(os.path.join(job_dir, "srun.pids"), "a") as f:
    f.write(f"{os.getpid()}\n")

  def on_signal(signum, frame):  # pylint: disable=unused-argument
    if signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
      print("srun: forcing job termination", file=sys.stderr, flush=True)
      task.send_signal(signal.SIGKILL)
    else:
      task.send_signal(signum)

  for s in (
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGINT,
    signal.SIGUSR1,
    signal.SIGUSR2,
  ):
    signal.signal(s, on_signal)
  rc = task.wait()
  rc = 128 - rc if rc < 0 else rc
  if rc:
    print(f"srun: error: localhost: task 0: Exited with exit code {rc}", file=sys.stderr)
  return rc


def _scontrol(config: str) -> int:
  cfg = json.loads(config)
  _log(cfg["log_dir"], "scontrol")
  if sys.argv[1:2] == ["requeue"] and len(sys.argv) == 3:
    return 0
  print(f"scontrol stand-in: unsupported {sys.argv[1:]}", file=sys.stderr)
  return 1


# ----------------------------------------------------------- what SLURM itself does, for tests


def job_dir(state_dir: str, job_id) -> str:
  return _job_dir(state_dir, job_id)


def read_pids(job_dir_: str, name: str) -> list[int]:
  path = os.path.join(job_dir_, name)
  if not os.path.exists(path):
    return []
  with open(path) as f:
    return [int(x) for x in f.read().split()]


def batch_rc(job_dir_: str, timeout: float) -> int:
  """Waits for the batch script to end; returns its exit status (128 + signal if killed)."""
  path = os.path.join(job_dir_, "batch.rc")
  deadline = time.time() + timeout
  while not os.path.exists(path):
    if time.time() > deadline:
      raise TimeoutError(f"batch script of {job_dir_} still running after {timeout} s")
    time.sleep(0.05)
  with open(path) as f:
    return int(f.read())


def _descendants(pids: list[int]) -> list[int]:
  """`pids` and every process they started, transitively (from /proc's parent links)."""
  children: dict[int, list[int]] = {}
  for name in os.listdir("/proc"):
    if not name.isdigit():
      continue
    try:
      with open(f"/proc/{name}/stat") as f:
        stat = f.read()
    except OSError:  # ended meanwhile
      continue
    # The command name in parentheses may hold spaces; the parent pid follows its ")".
    ppid = int(stat.rsplit(")", 1)[1].split()[1])
    children.setdefault(ppid, []).append(int(name))
  out, todo = [], list(pids)
  while todo:
    pid = todo.pop(0)
    out.append(pid)
    todo.extend(sorted(children.get(pid, [])))
  return out


def step_processes(job_dir_: str) -> list[int]:
  """Every process of the job's steps: each task and all it forked (input workers included),
  as slurmd's process tracking (cgroup) holds them; the tasks come first."""
  return _descendants(read_pids(job_dir_, "tasks"))


def time_limit_warning(job_dir_: str) -> tuple[int, list[int]]:
  """Sends what `--signal=[B:]SIG@T` asks for at T seconds before the limit; returns (sig, pids).

  As slurmctld's send_job_warn_signal: SIGCONT then SIG, to the batch shell only with "B:",
  else to every process of every job step (slurmd signals the step's whole process container:
  the tasks and their children, such as input workers) but not to the batch step (shell and
  srun client).
  """
  with open(os.path.join(job_dir_, "job.json")) as f:
    job = json.load(f)
  value = job["directives"]["--signal"]
  spec = value.split("@", 1)[0]
  batch_only = spec.startswith("B:")
  name = spec.split(":", 1)[-1]
  sig = int(name) if name.isdigit() else signal.Signals["SIG" + name.removeprefix("SIG")]
  pids = read_pids(job_dir_, "batch.pid") if batch_only else step_processes(job_dir_)
  for pid in pids:
    try:
      os.kill(pid, signal.SIGCONT)
      os.kill(pid, sig)
    except ProcessLookupError:  # a child that ended since the listing
      pass
  return int(sig), pids


def terminate(job_dir_: str) -> list[int]:
  """What a job's end (scancel, preemption, the limit itself) sends: SIGCONT + SIGTERM to every
  process of every step, the batch step (shell and srun client) included."""
  pids = (
    read_pids(job_dir_, "batch.pid") + read_pids(job_dir_, "srun.pids") + step_processes(job_dir_)
  )
  for pid in pids:
    try:
      os.kill(pid, signal.SIGCONT)
      os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
      pass
  return pids


def restart(job_dir_: str) -> None:
  """Starts a requeued job again: same job id, same submitted environment, restart count + 1."""
  path = os.path.join(job_dir_, "job.json")
  with open(path) as f:
    job = json.load(f)
  job["restart_count"] += 1
  with open(path, "w") as f:
    json.dump(job, f)
  for name in ("batch.pid", "batch.rc", "tasks", "srun.pids"):
    if os.path.exists(os.path.join(job_dir_, name)):
      os.remove(os.path.join(job_dir_, name))
  _spawn_batch(job_dir_)


MAIN = {
  "gcloud": _gcloud,
  "python3": _python3,
  "uv": _uv,
  "sbatch": _sbatch,
  "srun": _srun,
  "scontrol": _scontrol,
}

if __name__ == "__main__" and sys.argv[1:2] == ["run-batch"]:
  _run_batch(sys.argv[2])
if __name__ == "__main__" and sys.argv[1:2] == ["run-array"]:
  for _dir in sys.argv[2:]:
    _run_batch(_dir)
