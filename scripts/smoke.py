"""Smoke set for an installed `relations`: every CLI's --help, each evaluator on a small case (cold
and warm numba cache), one tiny training step per task.

  <venv>/bin/python scripts/smoke.py [--skip-train] [--skip-eval] [--tasks occlusion,...]
      [--workdir DIR]

Run with the interpreter of the environment under test (scripts/other_pythons.sh makes fresh ones). It
works in a temporary directory, so `import relations` and the console scripts resolve to the
installed package, not to this checkout; only the config files are read from the checkout.
Each evaluator runs twice on the same small case with an empty numba cache folder
(RELATIONS_CACHE_DIR): the first run compiles and must say so in one line, the second must load
the cache (no such line) and print the same metrics. Prints one line per check with its wall
time; exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.dirname(sys.executable)
CLIS = {  # console script -> the `python -m` form that must keep working
  "relations-train": "relations.train",
  "relations-predict": "relations.predict",
  "relations-evaluate": "relations.evaluate",
  "relations-prepare": "relations.datasets.prepare",
}
COMPILE_LINE = "relations: compiling numba code once"
TASKS = ("occlusion", "video_relations", "commonsense")

failures: list[str] = []


def run(name, cmd, cwd, env=None, expect=None):
  """Runs `cmd`; checks exit 0 and that each string of `expect` is in stdout. Returns the result."""
  t0 = time.perf_counter()
  out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
  wall = time.perf_counter() - t0
  missing = [e for e in (expect or ()) if e not in out.stdout]
  ok = out.returncode == 0 and not missing
  print(f"{'ok  ' if ok else 'FAIL'} {wall:7.1f} s  {name}", flush=True)
  if not ok:
    failures.append(name)
    print(f"  exit {out.returncode}; missing in stdout: {missing}", flush=True)
    print("  stdout: " + out.stdout[-3000:].replace("\n", "\n  "), flush=True)
    print("  stderr: " + out.stderr[-3000:].replace("\n", "\n  "), flush=True)
  out.wall = wall
  return out


def check(name, ok, detail=""):
  print(f"{'ok  ' if ok else 'FAIL'}            {name}{'' if ok else ': ' + detail}", flush=True)
  if not ok:
    failures.append(name)


def _metrics(stdout):
  """The output without wall-time figures ("12.3 s", "in 4 s"), which differ from run to run."""
  return re.sub(r"\d+(\.\d+)? ?(s|ms|seconds)\b", "<t>", stdout)


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)


def write_cases(d):
  """Small official-format cases for each evaluator; returns {name: evaluate argv}."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from relations.occlusion.data import realoob_io  # pylint: disable=g-import-not-at-top
  from relations.occlusion.metrics import synthetic  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  gt_root, pred_root, depth = (os.path.join(d, "occ", n) for n in ("gt", "pred", "depth"))
  os.makedirs(depth)
  for i in range(2):
    gt = synthetic.make_scene(rng, 48, 64, num_shapes=3)
    prob, theta = synthetic.make_prediction(rng, gt)
    realoob_io.write_gt(
      gt_root, f"im{i}", gt["boundaries"], gt["orientation"], gt["valid"], gt["depth"]
    )
    realoob_io.write_prediction(pred_root, f"im{i}", prob, theta)
    np.save(os.path.join(depth, f"im{i}.npy"), gt["depth"].astype(np.float64))
  realoob_io.write_split(gt_root, "test", ["im0", "im1"])

  box = lambda x0: [[x0, 0, x0 + 9, 9]] * 2  # noqa: E731
  gt = {
    "0000/1": [
      {
        "triplet": ["adult", "next_to", "dog"],
        "subject_tid": 0,
        "object_tid": 1,
        "duration": [0, 2],
        "sub_traj": box(0),
        "obj_traj": box(10),
      }
    ]
  }
  pred = {"triplet": ["adult", "next_to", "dog"], "score": 0.9, "duration": [0, 2]}
  pred.update(sub_traj=box(0), obj_traj=box(10))
  _write(os.path.join(d, "vrd", "gt.json"), json.dumps(gt))
  sub = {"version": "VERSION 1.0", "results": {"0000/1": [pred]}}
  _write(os.path.join(d, "vrd", "sub.json"), json.dumps(sub))

  annots = [{"event": "1 is at a party", "place": "party", "intent": ["talk to 2"]}]
  annots[0].update(before=["walk in"], after=["leave the party."])
  gens = [
    {"event_idx": 0, "inference_relation": r, "generations": ["talk to 2, then leave.", "walk in"]}
    for r in ("intent", "before", "after")
  ]
  _write(os.path.join(d, "cs", "val.json"), json.dumps(annots))
  _write(os.path.join(d, "cs", "gens.json"), json.dumps(gens))
  meteor = [] if shutil.which("java") else ["--no-meteor"]  # METEOR 1.5 is a Java jar
  return {
    "occlusion": ["occlusion", "--gt", gt_root, "--pred", pred_root],
    "depth": ["depth", "--gt", gt_root, "--depth", depth],
    "video_relations": [
      "video_relations",
      "--groundtruth",
      os.path.join(d, "vrd", "gt.json"),
      "--prediction",
      os.path.join(d, "vrd", "sub.json"),
    ],
    "commonsense": [
      "commonsense",
      "--annotations",
      os.path.join(d, "cs", "val.json"),
      "--generations",
      os.path.join(d, "cs", "gens.json"),
      *meteor,
    ],
  }


def train_args(task, d):
  """relations-train arguments for one tiny step of `task` on small data written under `d`."""
  common = [
    "--workdir",
    os.path.join(d, f"{task}_run"),
    f"--config.data.data_dir={os.path.join(d, task + '_tfds')}",
    "--config.evals={}",
    "--config.total_steps=1",
    "--config.checkpoint_every=1",
    "--config.log_every=1",
  ]
  config = os.path.join(REPO, "configs", f"{task}.py:tiny")
  if task == "occlusion":
    from relations.occlusion.data.occlusion_boundaries import make_dummy_data  # pylint: disable=g-import-not-at-top

    extra = [
      f"--config.data.manual_dir={make_dummy_data.HERE}",
      "--config.input.crop_size=(32, 32)",
    ]
    extra.append("--config.input.batch_size=8")
  elif task == "video_relations":
    from relations.video_relations.data import synthetic as synthetic_vidor  # pylint: disable=g-import-not-at-top

    raw = os.path.join(d, "vidor_raw")
    synthetic_vidor.generate(raw, 4, 1, seed=5, min_frames=40, max_frames=48)
    extra = [f"--config.data.manual_dir={raw}", "--config.model.vit.depth=1"]
    extra += ["--config.model.det_layers=1", "--config.input.image_size=(48, 64)"]
    extra += ["--config.model.num_queries=8", "--config.input.batch_size=8"]
  else:
    from relations.commonsense.data import synthetic as synthetic_commonsense  # pylint: disable=g-import-not-at-top

    raw = os.path.join(d, "visualcomet_raw")
    synthetic_commonsense.generate(
      raw, seed=1, train_images=6, val_images=2, test_images=2, verbose=False
    )
    extra = [f"--config.data.manual_dir={raw}", "--config.input.batch_size=8"]
  return ["--config", config, *common, *extra]


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--workdir", help="kept afterwards (default: a temporary folder, removed)")
  p.add_argument("--skip-train", action="store_true")
  p.add_argument("--skip-eval", action="store_true")
  p.add_argument("--tasks", default=",".join(TASKS))
  args = p.parse_args(argv)
  d = args.workdir or tempfile.mkdtemp(prefix="relations_smoke_")
  os.makedirs(d, exist_ok=True)
  cwd = os.path.join(d, "cwd")  # no `relations/` here: imports resolve to the installed package
  os.makedirs(cwd, exist_ok=True)
  import relations  # pylint: disable=g-import-not-at-top

  print(f"smoke: {sys.version.split()[0]}, relations from {os.path.dirname(relations.__file__)}")
  env = dict(os.environ)
  env.pop("PYTHONPATH", None)

  for script, module in CLIS.items():
    want = ["video_relations"] if script == "relations-evaluate" else ["usage"]  # a verb list
    run(f"{script} --help", [os.path.join(BIN, script), "--help"], cwd, env, want)
    run(f"python -m {module} --help", [sys.executable, "-m", module, "--help"], cwd, env, want)

  cases = {} if args.skip_eval else write_cases(os.path.join(d, "cases"))
  evaluate = os.path.join(BIN, "relations-evaluate")
  for name, argv in cases.items():
    env_eval = dict(env, RELATIONS_CACHE_DIR=os.path.join(d, "cache"))
    env_eval.pop("NUMBA_CACHE_DIR", None)
    cold = run(f"relations-evaluate {name} (cold cache)", [evaluate, *argv], cwd, env_eval)
    warm = run(f"relations-evaluate {name} (warm cache)", [evaluate, *argv], cwd, env_eval)
    same = _metrics(cold.stdout) == _metrics(warm.stdout)
    check(f"{name}: same metrics cold and warm", same, f"{cold.stdout!r} vs {warm.stdout!r}")
    check(f"{name}: no compile line when warm", COMPILE_LINE not in warm.stderr, warm.stderr)
    print(
      f"numba {name}: cold {cold.wall:.1f} s, warm {warm.wall:.1f} s, "
      f"compile line when cold: {COMPILE_LINE in cold.stderr}",
      flush=True,
    )

  if not args.skip_train:
    train = os.path.join(BIN, "relations-train")
    for task in args.tasks.split(","):
      run(
        f"relations-train {task} (1 tiny step)",
        [train, *train_args(task, d)],
        cwd,
        env,
        ["finished at step 1"],
      )

  if not args.workdir:
    shutil.rmtree(d, ignore_errors=True)
  print(f"smoke: {'FAILED: ' + ', '.join(failures) if failures else 'all ok'}", flush=True)
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
