"""`python -m relations.commonsense.pipeline`: inferences from generated events and places.

The paper's Task 2 / Tables 6-7: an event/place model (`target=event_place`) writes an event and
a place for every event record of a split from the image alone; an inference model then
generates before / intent / after from those instead of the ground-truth text.

  python -m relations.commonsense.pipeline \\
      --ep-config configs/commonsense.py:small,target=event_place --ep-workdir W_EP \\
      --config configs/commonsense.py:small --workdir W_INF --output OUT \\
      [--split val] [--set data.manual_dir=$VC ...] [--no-meteor] [--max-events N]

Writes under OUT:
  <split>_event_place.json    the generated {event_idx, img_fn, event, place}
  data/                       the release with <split>_annots.json's event and place replaced
                              by the generated ones (everything else linked to the original)
  inference/step_<N>/...      the inference model's official generation file and metrics
  pipeline_metrics.json       {"event_place": Table 6 metrics per field, "inference": BLEU /
                              METEOR / CIDEr / ... of the inferences against the split's
                              references, "steps", "split", "annotations"}
`--set KEY=VALUE` overrides apply to both configs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from relations import cli_errors, io_util
from relations.train import config_util


def write_generated_release(src_root: str, out_root: str, split: str, generated, max_events=0):
  """OUT/data: the release with `split`'s events and places replaced by `generated`.

  Every other entry of `src_root` is symlinked. With `max_events`, the split keeps only its
  first `max_events` event records (the ones generated).

  Returns:
    The path of the written `<split>_annots.json`.
  """
  io_util.makedirs(out_root)
  name = f"{split}_annots.json"
  for entry in os.listdir(src_root):
    dst = os.path.join(out_root, entry)
    if entry != name and not os.path.lexists(dst):
      os.symlink(os.path.abspath(os.path.join(src_root, entry)), dst)
  with open(os.path.join(src_root, name)) as f:
    annots = json.load(f)
  if max_events:
    annots = annots[:max_events]
  by_event = {g["event_idx"]: g for g in generated}
  for e, rec in enumerate(annots):
    if e not in by_event:
      raise ValueError(f"{name}: record {e}: no generated event / place for it")
    rec["event"], rec["place"] = by_event[e]["event"], by_event[e]["place"]
  path = os.path.join(out_root, name)
  io_util.write_json_atomic(path, annots)
  return path


def run(argv=None) -> dict:
  parser = argparse.ArgumentParser(
    prog="python -m relations.commonsense.pipeline", description=__doc__.splitlines()[0]
  )
  parser.add_argument("--ep-config", required=True, help="event/place model config (file:arg)")
  parser.add_argument("--ep-workdir", required=True, help="its training workdir")
  parser.add_argument("--config", required=True, help="inference model config (file:arg)")
  parser.add_argument("--workdir", required=True, help="its training workdir")
  parser.add_argument("--output", required=True, help="output folder")
  parser.add_argument("--split", default="val")
  parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for both configs")
  parser.add_argument("--no-meteor", action="store_true")
  parser.add_argument("--max-events", type=cli_errors.int_in(0), default=0)
  args = parser.parse_args(argv)

  ep_config = config_util.load_config(args.ep_config, list(args.set))
  if ep_config.loss.get("target", "inference") != "event_place":
    raise cli_errors.InputError(
      "not an event/place model config (its arg needs target=event_place)",
      file=args.ep_config,
      field="--ep-config",
    )
  import jax  # pylint: disable=g-import-not-at-top

  from relations.commonsense import evaluator as inference_eval  # pylint: disable=g-import-not-at-top
  from relations.commonsense import event_place  # pylint: disable=g-import-not-at-top
  from relations.commonsense.data.visualcomet import records as records_lib  # pylint: disable=g-import-not-at-top
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  # 1. Events and places from the image.
  model, params, ep_step, mesh = trainer.restore_params(ep_config, args.ep_workdir)
  ec = ep_config.evals.val
  with jax.set_mesh(mesh):
    generated = event_place.generate_split(
      model,
      jax.device_get(params),
      ep_config,
      args.split,
      top_p=float(ec.top_p),
      batch_size=int(ec.batch_size),
      max_records=args.max_events,
    )
  root = ep_config.data.manual_dir
  annots = records_lib.load_annotations(os.path.join(root, f"{args.split}_annots.json"))
  ep_metrics = event_place.score(generated, annots, meteor=not args.no_meteor)
  io_util.write_json_atomic(
    os.path.join(args.output, event_place.FILE_NAME.format(split=args.split)), generated
  )

  # 2. Inferences from them: the inference model reads a release whose split carries them.
  data = os.path.join(args.output, "data")
  annots_path = write_generated_release(root, data, args.split, generated, args.max_events)
  config = config_util.load_config(
    args.config,
    list(args.set)
    + [f"data.manual_dir={data}", f"data.data_dir={os.path.join(args.output, 'tfds')}"],
  )
  model, params, inf_step, mesh = trainer.restore_params(config, args.workdir)
  ec = config.evals.val
  with ec.unlocked():
    ec.split = args.split
    ec.text_given = True  # the generated event and place are the text
    ec.acc50 = False
    ec.meteor = not args.no_meteor
  ev = inference_eval.Evaluator(model, config, ec, os.path.join(args.output, "inference"))
  with jax.set_mesh(mesh):
    inf_metrics = ev.run(params, inf_step)
  out = {
    "split": args.split,
    "event_place": ep_metrics,
    "inference": inf_metrics,
    "steps": {"event_place": ep_step, "inference": inf_step},
    "annotations": annots_path,
  }
  path = os.path.join(args.output, "pipeline_metrics.json")
  io_util.write_json_atomic(path, out)
  print(json.dumps(out, indent=1, sort_keys=True))
  print(f"wrote {path}")
  return out


@cli_errors.entry_point
def main(argv=None) -> int:
  run(argv)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
