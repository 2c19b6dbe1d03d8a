"""Demo: synthetic VidOR -> TFDS -> tiny relation tracker -> official submissions -> scores.

`run_demo(workdir)` is this task's part of the README demo (`python -m relations.demo`).
"""

import os
import time


DEMO_HEADLINE = ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")


def run_demo(workdir, num_train=160, num_val=16, overrides=()):
  """Synthetic VidOR -> TFDS -> train tiny -> predict both modes -> evaluate.

  Writes the official submissions of both modes and of the prior baseline
  under `<workdir>/train/eval/val/`, GIFs of two videos per mode, and scores
  the detected-mode submission once more through the CLI
  (`python -m relations.evaluate video_relations`, which validates it first).

  Returns:
    dict of headline metrics: `<mode>/<metric>` for modes groundtruth,
    detected and prior, plus detection AP50, MOTA and ID switches, the
    wall-clock seconds of each stage and the training steps per second.
  """
  from relations.video_relations.data import synthetic as synthetic_vidor  # pylint: disable=g-import-not-at-top
  from relations.video_relations.metrics import cli as vidor_cli  # pylint: disable=g-import-not-at-top
  from relations.train import config_util  # pylint: disable=g-import-not-at-top
  from relations.train import trainer  # pylint: disable=g-import-not-at-top
  from relations import console  # pylint: disable=g-import-not-at-top

  t0 = time.perf_counter()
  workdir = os.path.abspath(workdir)
  raw = os.path.join(workdir, "vidor_synthetic")
  if not os.path.exists(os.path.join(raw, "annotation")):
    with console.stage(
      f"synthetic VidOR-layout videos ({num_train} train, {num_val} val)",
      prefix="[video_relations]",
    ):
      synthetic_vidor.generate(raw, num_train, num_val, seed=0, overwrite=True)
  config = config_util.load_config(
    "configs/video_relations.py:tiny",
    [
      f"data.data_dir={os.path.join(workdir, 'tfds')}",
      f"data.manual_dir={raw}",
      f"evals.val.groundtruth={os.path.join(raw, 'annotation', 'validation')}",
      *overrides,
    ],
  )
  t_data = time.perf_counter() - t0
  with console.stage(
    f"train tiny ({config.total_steps} steps) + predict + evaluate", prefix="[video_relations]"
  ):
    result = trainer.train(config, os.path.join(workdir, "train"))
  t_train = time.perf_counter() - t0 - t_data
  step = result.step
  sub = os.path.join(workdir, "train", "eval", "val", f"submission_detected_step{step}.json")
  cli_json = os.path.join(workdir, "cli_detected_metrics.json")
  with console.stage(
    "score the submission with python -m relations.evaluate vidor", prefix="[video_relations]"
  ):
    rc = vidor_cli.main(
      [
        "--groundtruth",
        os.path.join(raw, "annotation", "validation"),
        "--prediction",
        sub,
        "--protocol",
        config.video.protocol,
        "--output",
        cli_json,
      ]
    )
  if rc != 0:
    raise RuntimeError(f"python -m relations.evaluate video_relations failed on {sub} (exit {rc})")
  keys = [f"{m}/{k}" for m in ("groundtruth", "detected", "prior") for k in DEMO_HEADLINE]
  keys += ["detected/AP50", "detected/MOTA", "detected/IDSW"]
  ev = {k.removeprefix("val/"): v for k, v in result.eval_metrics.items()}
  out = {k: float(ev[k]) for k in keys if k in ev}
  out["submission"] = sub
  # The builder is prepared inside `trainer.train`, so `train_and_eval` includes the TFDS build.
  out["seconds"] = {
    "data": t_data,
    "train_and_eval": t_train,
    "total": time.perf_counter() - t0,
  }
  out["steps_per_sec"] = result.steps_per_sec
  return out
