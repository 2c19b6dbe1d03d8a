"""The README demo: every task end to end on synthetic data in the official formats.

  python -m relations.demo [--workdir demo_out] [--tasks occlusion,video_relations,...]

For each task: write synthetic data in the official on-disk layout -> TFDS build -> train the tiny
config with the shared trainer -> predict -> write the official submission format -> score it with
the official metrics. Each task writes its predictions, metrics and pictures under
`<workdir>/<task>/`; a one-screen summary is printed at the end and saved as `summary.json`.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import traceback

from relations import cli_errors, console, io_util

TASKS = ("occlusion", "video_relations", "commonsense")


def _flatten(d: dict, prefix: str = "") -> dict:
  """{'model': {'B-ODS': 0.4}} -> {'model/B-ODS': 0.4}, so nested task summaries print flat."""
  out = {}
  for k, v in d.items():
    if isinstance(v, dict):
      out.update(_flatten(v, f"{prefix}{k}/"))
    else:
      out[f"{prefix}{k}"] = v
  return out


def _fmt(v) -> str:
  if isinstance(v, float):
    return f"{v:.4f}"
  return str(v)


def print_summary(summary: dict, tasks, workdir: str) -> None:
  """One screen: per task its wall time and headline metrics (nested dicts flattened)."""
  print("\n" + "=" * 78)
  print(f"relations demo summary  ({summary['total_seconds']:.0f} s, outputs in {workdir})")
  print("=" * 78)
  for task in tasks:
    items = _flatten(summary[task])
    print(f"{task}  [{items.get('wall_seconds', float('nan')):.0f} s]")
    for k, v in items.items():
      if k == "wall_seconds" or k.split("/")[0] == "seconds":
        continue  # the tasks' own stage timings stay in summary.json
      print(f"    {k:<40} {_fmt(v)}")
  print("=" * 78)


@cli_errors.entry_point
def main(argv=None) -> int:
  p = cli_errors.ArgumentParser(
    description="Run every task's demo on synthetic data.", prog="python -m relations.demo"
  )
  p.add_argument("--workdir", default="demo_out")
  p.add_argument(
    "--tasks",
    default=TASKS,
    type=cli_errors.names(TASKS),
    help="comma-separated subset of " + ",".join(TASKS),
  )
  args = p.parse_args(argv)
  tasks = list(args.tasks)
  cli_errors.check_output_dir(args.workdir)
  workdir = os.path.abspath(args.workdir)
  os.makedirs(workdir, exist_ok=True)
  from absl import logging  # pylint: disable=g-import-not-at-top

  logging.set_verbosity(logging.WARNING)

  summary, failed = {}, []
  t_all = time.time()
  for task in tasks:
    t0 = time.time()
    print(f"=== {task}: synthetic data -> TFDS -> train tiny -> predict -> evaluate", flush=True)
    try:
      with console.stage("import", prefix=f"[{task}]"):
        module = importlib.import_module(f"relations.{task}.demo")
      metrics = module.run_demo(os.path.join(workdir, task))
      summary[task] = {**metrics, "wall_seconds": round(time.time() - t0, 1)}
      print(f"=== {task}: done in {time.time() - t0:.1f} s", flush=True)
    except Exception as e:  # pylint: disable=broad-except
      if cli_errors.debug_requested():
        traceback.print_exc()
      else:  # the other tasks still run; the summary marks this one failed
        print(
          f"error: {task}: {type(e).__name__}: {e} (rerun with --debug or "
          f"{cli_errors.DEBUG_ENV}=1 for the traceback)",
          file=sys.stderr,
          flush=True,
        )
      failed.append(task)
      summary[task] = {"error": "failed (see above)", "wall_seconds": round(time.time() - t0, 1)}
      print(f"=== {task}: FAILED after {time.time() - t0:.1f} s", flush=True)
  summary["total_seconds"] = round(time.time() - t_all, 1)
  io_util.write_json_atomic(os.path.join(workdir, "summary.json"), summary, default=str)

  print_summary(summary, tasks, workdir)
  if failed:
    print(f"FAILED: {', '.join(failed)}")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
