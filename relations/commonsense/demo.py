"""Demo: synthetic VisualCOMET -> TFDS -> tiny generator -> official generation JSON -> metrics + report.

`run_demo(workdir)` is this task's part of the README demo (`python -m relations.demo`).
"""

from __future__ import annotations

import os

from PIL import Image

from relations import io_util
from relations.commonsense.task import make_builder


MODALITIES = {  # name -> config arg (the must-show rows of Table 2)
  "Event+Place": "variant=tiny,inputs=event_place,pg=false",
  "Image+PG": "variant=tiny,inputs=image,pg=true",
  "Image+Event+Place+PG": "variant=tiny,inputs=image_event_place,pg=true",
}
HEADLINE = ("Bleu_2", "METEOR", "CIDEr", "Acc@50", "Unique", "Novel")


def demo_config(root: str, arg: str = "variant=tiny", **eval_overrides):
  """The tiny config pointed at `root`/data (synthetic) and `root`/tfds."""
  from relations.train import config_util  # pylint: disable=g-import-not-at-top

  config = config_util.load_config(
    f"configs/commonsense.py:{arg}",
    [
      f"data.manual_dir={os.path.join(root, 'data')}",
      f"data.data_dir={os.path.join(root, 'tfds')}",
    ],
  )
  with config.unlocked():
    config.evals.val.update(eval_overrides)
  return config


def make_data(root: str, seed: int = 0) -> None:
  """Synthetic corpus in the official layout + the two TFDS configs we read."""
  from relations.commonsense.data import synthetic as synthetic_commonsense  # pylint: disable=g-import-not-at-top

  data = os.path.join(root, "data")
  if not os.path.exists(os.path.join(data, "val_annots.json")):
    synthetic_commonsense.generate(data, seed=seed, verbose=False, overwrite=True)
  config = demo_config(root)
  make_builder(config, "training")
  make_builder(config, "generation")


def train_and_evaluate(root: str, arg: str, name: str, steps: int = 0, **eval_overrides):
  """Trains one config with the shared trainer; returns its val metrics."""
  from relations.train import trainer  # pylint: disable=g-import-not-at-top

  config = demo_config(root, arg, **eval_overrides)
  if steps:
    with config.unlocked():
      config.total_steps = config.checkpoint_every = steps
  result = trainer.train(config, os.path.join(root, name))
  metrics = {k.split("/", 1)[1]: v for k, v in result.eval_metrics.items() if k.startswith("val/")}
  metrics["steps_per_sec"] = result.steps_per_sec
  gens = os.path.join(root, name, "eval", "val", f"step_{result.step}")
  return metrics, gens


def write_report(root: str, gens_dir: str, out_dir: str, num_events: int = 6) -> str:
  """HTML page + PNGs: each image (person boxes tagged) next to its samples.

  Returns:
    The path of `report.html`.
  """
  import base64  # pylint: disable=g-import-not-at-top
  import html  # pylint: disable=g-import-not-at-top
  import io  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  from PIL import ImageDraw  # pylint: disable=g-import-not-at-top
  from relations.commonsense.data.visualcomet import records as records_lib  # pylint: disable=g-import-not-at-top

  data = os.path.join(root, "data")
  gen_file = [f for f in os.listdir(gens_dir) if f.endswith("top_p_0.9.json")]
  with open(os.path.join(gens_dir, gen_file[0])) as f:
    gens = json.load(f)
  annots = records_lib.load_annotations(os.path.join(data, "val_annots.json"))
  by_event = {}
  for g in gens:
    by_event.setdefault(g["event_idx"], []).append(g)
  os.makedirs(out_dir, exist_ok=True)
  rows = []
  for e in sorted(by_event)[:num_events]:
    rec = annots[e]
    img = Image.open(os.path.join(data, "vcr1images", rec["img_fn"]))
    img = img.convert("RGB").resize((256, 256))
    meta = records_lib.load_metadata(os.path.join(data, "vcr1images", rec["metadata_fn"]))
    sx, sy = 256 / meta["width"], 256 / meta["height"]
    draw = ImageDraw.Draw(img)
    for i, (name, box) in enumerate(zip(meta["names"], meta["boxes"])):
      x1, y1, x2, y2 = (float(v) for v in box[:4])
      colour = (255, 255, 255) if name == "person" else (128, 128, 128)
      draw.rectangle([x1 * sx, y1 * sy, x2 * sx, y2 * sy], outline=colour)
      draw.text((x1 * sx + 2, y1 * sy + 1), str(i + 1), fill=colour)
    png = os.path.join(out_dir, f"event_{e:04d}.png")
    img.save(png)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    src = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    cells = []
    for g in by_event[e]:
      rel = g["inference_relation"]
      samples = "".join(f"<li>{html.escape(t)}</li>" for t in g["generations"])
      refs = "; ".join(html.escape(t) for t in rec.get(rel, [])) or "(none)"
      cells.append(f"<td><b>{rel}</b><ol>{samples}</ol><small>references: {refs}</small></td>")
    rows.append(
      f"<tr><td><img src='{src}' width=256><br>"
      f"<b>event</b> {html.escape(rec['event'])}<br>"
      f"<b>place</b> {html.escape(rec['place'])}</td>{''.join(cells)}</tr>"
    )
  page = (
    "<html><head><meta charset='utf-8'><title>VisualCOMET demo"
    "</title></head><body><h2>Generations (5 nucleus samples, p=0.9) "
    "next to their images; box labels are the person tags</h2>"
    f"<p>{html.escape(gen_file[0])}</p><table border=1 "
    "cellpadding=4>" + "".join(rows) + "</table></body></html>"
  )
  path = os.path.join(out_dir, "report.html")
  io_util.write_text_atomic(path, page)
  return path


def run_demo(workdir: str) -> dict:
  """Synthetic data -> TFDS -> tiny Image+Event+Place+PG -> metrics + report.

  Acc@50 is estimated on the first 60 queries to fit the demo's time; run
  `python -m relations.commonsense.demo --modalities DIR` for full
  validation numbers of the three modalities.
  """
  import time  # pylint: disable=g-import-not-at-top
  import json  # pylint: disable=g-import-not-at-top
  from relations import console  # pylint: disable=g-import-not-at-top

  t0 = time.perf_counter()
  root = os.path.abspath(workdir)
  with console.stage("synthetic VisualCOMET-layout data", prefix="[commonsense]"):
    make_data(root)
  t_data = time.perf_counter() - t0
  with console.stage(
    "train tiny Image+Event+Place+PG + generate + evaluate", prefix="[commonsense]"
  ):
    metrics, gens = train_and_evaluate(
      root, MODALITIES["Image+Event+Place+PG"], "image_event_place_pg", acc50_max_queries=60
    )
  with console.stage("HTML report", prefix="[commonsense]"):
    report = write_report(root, gens, os.path.join(root, "report"))
  out = {
    "Image+Event+Place+PG": {k: metrics.get(k) for k in HEADLINE},
    "Acc@50_queries": 60,
    "generations": gens,
    "report": report,
    "seconds": {"data": t_data, "total": time.perf_counter() - t0},
    "steps_per_sec": metrics["steps_per_sec"],
  }
  with open(os.path.join(root, "demo_metrics.json"), "w") as f:
    json.dump(out, f, indent=2)
  return out


def run_modalities(workdir: str, steps: int = 0) -> dict:
  """Trains the three must-show modalities; full val metrics for each.

  Args:
    workdir: data, runs and `modalities.json` go here.
    steps: training steps (0 = the tiny config's).
  """
  import json  # pylint: disable=g-import-not-at-top

  root = os.path.abspath(workdir)
  make_data(root)
  table = {}
  for name, arg in MODALITIES.items():
    metrics, gens = train_and_evaluate(root, arg, name.replace("+", "_"), steps=steps)
    table[name] = {k: metrics.get(k) for k in HEADLINE}
    table[name]["generations"] = gens
  print(f"{'modality':<24}" + "".join(f"{k:>9}" for k in HEADLINE))
  for name, m in table.items():
    print(
      f"{name:<24}"
      + "".join(f"{100 * m[k]:9.2f}" if m[k] is not None else f"{'n/a':>9}" for k in HEADLINE)
    )
  with open(os.path.join(root, "modalities.json"), "w") as f:
    json.dump(table, f, indent=2)
  return table


if __name__ == "__main__":
  import sys  # pylint: disable=g-import-not-at-top

  if len(sys.argv) in (3, 4) and sys.argv[1] == "--modalities":
    run_modalities(sys.argv[2], int(sys.argv[3]) if len(sys.argv) == 4 else 0)
  elif len(sys.argv) == 3 and sys.argv[1] == "--demo":
    print(run_demo(sys.argv[2]))
  else:
    raise SystemExit(
      "usage: python -m relations.commonsense.demo (--demo WORKDIR | --modalities WORKDIR [STEPS])"
    )
