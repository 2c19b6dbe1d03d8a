"""Evaluation wall time with 1 vs 2 processes: `relations.predict` of a tiny config, end to end.

  python bench/sharded_eval.py [--task commonsense] [--val_images 64] [--workdir DIR] [--keep]

Writes the task's synthetic release with a validation split of `--val_images` images (commonsense:
its ~6 (event, relation) records per image are generated with 5 nucleus samples each, plus Acc@50
over its queries; METEOR is off because its Java process is not part of the loop), saves a freshly
initialised checkpoint of the tiny config, prepares the TFDS splits once (a multi-process run reads
prepared data), then times `python -m relations.predict` from outside, as a user runs it:

  1 process    the default (one CPU device, XLA's thread pool over both cores);
  2 processes  jax.distributed over loopback, one CPU device each, every process evaluating its
               shard (`relations.train.eval_loop`), process 0 writing and scoring.

Both runs must print the same metrics (every process); the official files must be identical.

Twice: unpinned (each process may use every core: on a 2-core machine one process already runs
XLA's larger ops on both cores, so a second process adds no compute), and with one core per process
(process p pinned to core p, as if each process were a host of its own: what adding hosts buys).
Prints `uptime` before and after, each run's wall time and its own "eval seconds", and as its last
line: `sharded eval: <task> 1 process X.X s, 2 processes Y.Y s, ratio 2/1 R.RRx; one core per
process X.X s, Y.Y s, ratio 2/1 R.RRx`.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# VisualCOMET validation (nucleus-sampled generations + Acc@50) is the slowest evaluation of a run.
SPEC = {"commonsense": "configs/commonsense.py:variant=tiny"}


def _uptime(tag):
  out = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
  print(f"uptime {tag}: {out}", flush=True)


def _data(task, root, val_images):
  """(config overrides, prepare(config)) for the task's synthetic release under `root`."""
  data, tfds_dir = os.path.join(root, "data"), os.path.join(root, "tfds")
  over = [f"data.data_dir={tfds_dir}", f"data.manual_dir={data}"]
  if task == "commonsense":
    from relations.commonsense import task as t  # pylint: disable=g-import-not-at-top
    from relations.commonsense.data import synthetic  # pylint: disable=g-import-not-at-top

    if not os.path.isdir(data):
      synthetic.generate(
        data, seed=1, train_images=4, val_images=val_images, test_images=1, verbose=False
      )
    return over + ["evals.val.meteor=False"], lambda c: t.make_builder(c, "generation")
  raise ValueError(f"no synthetic evaluation set for {task!r}")


def _checkpoint(spec, overrides, workdir):
  """Saves freshly initialised parameters of `spec` as step 1 of `workdir`."""
  import jax  # pylint: disable=g-import-not-at-top
  from relations.train import checkpoint as ckpt_lib  # pylint: disable=g-import-not-at-top
  from relations.train import config_util, trainer  # pylint: disable=g-import-not-at-top

  config = config_util.load_config(spec, overrides)
  s = trainer.setup(config)
  with jax.set_mesh(s["mesh"]):
    state = jax.jit(s["init_fn"], out_shardings=s["state_sh"])(jax.random.key(int(config.seed)))
  mngr = ckpt_lib.make_manager(workdir, keep=1, async_save=False)
  ckpt_lib.save(mngr, 1, state, {"step": 1, "data_seed": int(config.seed)}, force=True)
  mngr.wait_until_finished()
  mngr.close()
  return config


def _predict(spec, overrides, workdir, nproc, port, pin=False):
  """Runs `relations.predict` with `nproc` processes; (wall s, [metrics per process], logs).

  pin: process p runs on CPU core p only (as if each process were a host with one core).
  """
  procs = []
  t0 = time.perf_counter()
  for pid in range(nproc):
    preexec = (lambda core=pid: os.sched_setaffinity(0, {core})) if pin else None
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=1")
    if nproc > 1:
      env.update(
        RELATIONS_JAX_INIT="1",
        RELATIONS_COORDINATOR=f"127.0.0.1:{port}",
        RELATIONS_NUM_PROCESSES=str(nproc),
        RELATIONS_PROCESS_ID=str(pid),
      )
    cmd = [sys.executable, "-m", "relations.predict", "--config", spec, "--workdir", workdir]
    cmd += [f"--config.{o}" for o in overrides]
    procs.append(
      subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=preexec,
      )
    )
  logs = [p.communicate()[0] for p in procs]
  wall = time.perf_counter() - t0
  for p, log in zip(procs, logs):
    if p.returncode:
      sys.exit(f"relations.predict failed ({nproc} processes):\n{log[-4000:]}")
  metrics = []
  for log in logs:
    lines = [l for l in log.splitlines() if l.startswith("metrics ")]
    metrics.append(json.loads(lines[-1][len("metrics ") :]) if lines else None)
  return wall, metrics, logs


def _eval_seconds(log):
  for line in log.splitlines():
    if "eval seconds" in line:
      return line.strip()
  return ""


def _files(root):
  out = []
  for d, _, names in os.walk(root):
    out += [os.path.relpath(os.path.join(d, n), root) for n in names]
  return sorted(out)


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
  ap.add_argument("--task", choices=sorted(SPEC), default="commonsense")
  ap.add_argument("--val_images", type=int, default=64, help="validation images")
  ap.add_argument("--workdir", default="")
  ap.add_argument("--keep", action="store_true")
  args = ap.parse_args(argv)
  import portpicker  # pylint: disable=g-import-not-at-top

  root = args.workdir or tempfile.mkdtemp(prefix="sharded_eval_")
  spec = SPEC[args.task]
  overrides, prepare = _data(args.task, root, args.val_images)
  base = os.path.join(root, "ckpt")
  if not os.path.isdir(base):
    config = _checkpoint(spec, overrides, base)
    prepare(config)
  # A warm-up run (1 process) first: the TFDS splits are read once before timing, like the others.
  w = os.path.join(root, "w_warmup")
  shutil.rmtree(w, ignore_errors=True)
  shutil.copytree(base, w)
  _predict(spec, overrides, w, 1, portpicker.pick_unused_port())
  ratios, ok = {}, True
  for pin in (False, True):
    mode = "one core per process" if pin else "unpinned"
    runs = {}
    for nproc in (1, 2):
      w = os.path.join(root, f"w_{nproc}{'_pinned' if pin else ''}")
      shutil.rmtree(w, ignore_errors=True)
      shutil.copytree(base, w)
      _uptime(f"before {nproc} process(es), {mode}")
      wall, metrics, logs = _predict(spec, overrides, w, nproc, portpicker.pick_unused_port(), pin)
      runs[nproc] = (w, wall, metrics)
      print(f"{nproc} process(es), {mode}: {wall:.1f} s wall", flush=True)
      for pid, log in enumerate(logs):
        if _eval_seconds(log):
          print(f"  process {pid}: {_eval_seconds(log)}")
    (w1, t1, m1), (w2, t2, m2) = runs[1], runs[2]
    same = all(m == m1[0] for m in m2)
    e1, e2 = os.path.join(w1, "eval"), os.path.join(w2, "eval")
    files = _files(e1)
    same_files = files == _files(e2) and all(
      filecmp.cmp(os.path.join(e1, f), os.path.join(e2, f), shallow=False)
      for f in files
      if os.path.basename(f) != "metrics.json"  # names its own workdir
    )
    print(
      f"{mode}: metrics identical on every process: {same}; official files identical: {same_files}"
    )
    ok &= same and same_files
    ratios[pin] = (t1, t2)
  print(f"metrics: {json.dumps(m1[0], sort_keys=True)}")
  _uptime("after")
  if not args.keep and not args.workdir:
    shutil.rmtree(root, ignore_errors=True)
  (t1, t2), (p1, p2) = ratios[False], ratios[True]
  print(
    f"sharded eval: {args.task} 1 process {t1:.1f} s, 2 processes {t2:.1f} s, "
    f"ratio 2/1 {t2 / t1:.2f}x; one core per process {p1:.1f} s, {p2:.1f} s, "
    f"ratio 2/1 {p2 / p1:.2f}x"
  )
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
