"""`python -m relations.predict --config configs/x.py:arg --workdir W [--eval NAME] [--step N]
[--output OUT]`.

Restores the latest (or given) checkpoint of a training run and runs its registered evaluators
(`config.evals.<NAME>`), which write predictions in the official format for their split under
`W/eval/<NAME>/` (or `OUT/eval/<NAME>/` with `--output OUT`, for a run that must stay as it is,
e.g. read-only) and score them. Without `--eval` every configured evaluator runs except those
with `during_training=False` (run only when named). On a split
without ground truth (video relations: `--eval test`, the VidOR test split) the evaluator writes
the official challenge file, validates it, prints its path and size and scores nothing.

No training data is read: the model comes from the config and the parameter shapes from the
checkpoint (`trainer.restore_params`), so only the evaluated split needs to be present. With
several processes (`--distributed`) each predicts its shard of the split and process 0 writes
the files (`relations.train.eval_loop`); every process prints the same `metrics {...}` line.
"""

import json
import os
import sys
import time

from relations import cli_errors
from relations import io_util
from relations.train import cli
from relations.train import distributed


def checkpoint_steps(workdir: str) -> list[int]:
  """Steps of the complete checkpoints in `workdir/checkpoints` (orbax names them by step).

  Raises:
    cli_errors.InputError: no such workdir, or no checkpoint in it.
  """
  ckpt_dir = os.path.join(workdir, "checkpoints")
  if not io_util.isdir(workdir):
    raise cli_errors.InputError(
      "no such training workdir (or not a directory); expected the "
      "--workdir of a python -m relations.train run",
      file=workdir,
    )
  steps = sorted(
    int(n) for n in (io_util.listdir(ckpt_dir) if io_util.isdir(ckpt_dir) else ()) if n.isdigit()
  )
  if not steps:
    raise cli_errors.InputError(
      "no checkpoint here; train first (python -m relations.train "
      "--config ... --workdir ...) or point --workdir at a trained run",
      file=ckpt_dir,
    )
  return steps


@cli_errors.entry_point
def main(argv=None) -> int:
  def extra(p):
    p.add_argument("--eval", action="append", default=None, help="evaluator name (repeatable)")
    p.add_argument(
      "--step", type=cli_errors.int_in(0), default=None, help="checkpoint step (default: latest)"
    )
    p.add_argument(
      "--output",
      default=None,
      help="write predictions and metrics here instead of into --workdir (a read-only run)",
    )

  args, overrides = cli.parse(
    argv,
    "Write predictions and metrics from a trained checkpoint.",
    extra,
    prog="relations.predict",
  )
  # Everything is checked before JAX, orbax or an evaluator starts.
  config = cli.load_checked_config(args.config, overrides)
  # Without --eval: every evaluator but those marked during_training=False (a blind test split's
  # submission is written only when asked for by name).
  names = args.eval or [
    n for n, c in (config.get("evals") or {}).items() if c.get("during_training", True)
  ]
  unknown = [n for n in names if n not in (config.get("evals") or {})]
  if unknown:
    raise cli_errors.InputError(
      f"unknown evaluator(s) {', '.join(map(repr, unknown))}; the "
      f"config has {', '.join(sorted(config.get('evals') or {}))}",
      file=args.config,
      field="--eval",
    )
  steps = checkpoint_steps(args.workdir)
  if args.step is not None and args.step not in steps:
    raise cli_errors.InputError(
      f"no checkpoint for step {args.step}; there are {', '.join(map(str, steps))}",
      file=os.path.join(args.workdir, "checkpoints"),
    )
  output = args.output or args.workdir
  if args.output:
    cli_errors.check_output_dir(args.output)
  distributed.maybe_initialize(args.distributed)
  import jax  # pylint: disable=g-import-not-at-top
  from relations.train import summaries, trainer  # pylint: disable=g-import-not-at-top

  model, params, step, mesh = trainer.restore_params(config, args.workdir, args.step)
  evaluators = trainer.build_evaluators(model, config, output)
  results = {}
  with jax.set_mesh(mesh):
    for name in names:
      t0 = time.perf_counter()
      res, _ = summaries.split_media(evaluators[name].run(params, step))  # TensorBoard's only
      seconds = time.perf_counter() - t0
      results[name] = {k: float(v) for k, v in res.items()}
      print(f"[{name}] step {step}: " + ", ".join(f"{k}={float(v):.4f}" for k, v in res.items()))
      print(f"[{name}] eval seconds {seconds:.1f} (process {jax.process_index()})")
  # Every process returns the same metrics (the evaluation loop broadcasts them); one line with
  # their exact values lets a launcher check that.
  print("metrics " + json.dumps(results, sort_keys=True))
  if jax.process_index() == 0:
    io_util.write_json_atomic(os.path.join(output, f"predict_step{step}.json"), results)
  return 0


if __name__ == "__main__":
  sys.exit(main())
