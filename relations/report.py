"""`python -m relations.report W [--format md|csv|tex] [--output FILE] [--plot PNG]`.

Collects a sweep (`python -m relations.sweep ... --workdir W`) into the paper's table: one line
per row in the sweep's order, the row's label columns (the config's `describe_row`, saved in
row.json), each row's final metrics from its `train_summary.json` (what the evaluators returned
at the last step) under the paper's column names, its steps and wall time. A row that failed is
marked failed with its log; a row without results is marked missing (or running / interrupted /
submitted, from its status.json). The paper's published numbers follow as reference lines where
the task's spec or paper has them.

Tables by task:
  commonsense      VisualCOMET Table 2: Modalities, Text Given, B-2, M, C, Acc@50, Unique, Novel
                   (x100, val); reference lines: the paper's Table 2 (seed 003), with its GT row.
  occlusion        RealOOB Table 3 columns: B-ODS, B-OIS, B-AP, AC, O-ODS, O-OIS, O-AP (test);
                   reference lines: the spec's Table 3 methods (sanity ranges, not ablations of
                   this model). With finished rows, also one figure of every row's boundary PR
                   and orientation PR curves (W/pr_curves.png, or --plot): each row's written
                   predictions are scored again with `python -m relations.evaluate occlusion`
                   (cached in <row>/report/), whose JSON holds the curves.
  video_relations  mAP, R@50, R@100, P@1, P@5, P@10 (x100) per track mode the row evaluated.
Any other task: every scalar metric of the evaluators, under its own name.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys

from relations import cli_errors
from relations import io_util

SWEEP_FILE = "sweep.json"

# VisualCOMET (Park et al., ECCV 2020) Table 2, validation set, x100 (seed 003). Keys:
# (Modalities, Text Given) as the config's describe_row names them.
_VC_TABLE2 = (
  ("Place", "Yes", 5.87, 6.25, 4.69, 14.55, 6.84, 47.57),
  ("Event", "Yes", 10.99, 9.58, 14.81, 31.95, 39.56, 47.19),
  ("Event + Place", "Yes", 11.46, 9.82, 15.73, 33.06, 41.39, 47.61),
  ("Image + Place", "Yes", 7.42, 7.33, 6.69, 20.39, 27.70, 46.50),
  ("Image + Event", "Yes", 12.52, 10.73, 16.49, 37.00, 42.83, 47.40),
  ("Image + Event + Place", "Yes", 12.78, 10.87, 17.12, 38.25, 43.83, 48.15),
  ("Image + Event + Place + EP Loss", "Yes", 11.15, 10.02, 13.60, 33.23, 42.13, 51.25),
  ("Image + Event + Place + PG", "Yes", 13.50, 11.55, 18.27, 38.72, 44.49, 49.03),
  ("Image + Event + Place + PG + EP Loss", "Yes", 12.10, 10.74, 15.00, 34.07, 42.33, 51.73),
  ("No Input", "No", 3.76, 5.23, 2.07, 6.87, 0.00, 33.33),
  ("Image", "No", 6.79, 7.13, 5.63, 18.22, 26.38, 46.80),
  ("Image + PG", "No", 8.20, 8.44, 7.61, 21.5, 29.09, 45.53),
  ("Image + Event + Place", "No", 6.97, 7.55, 6.01, 16.81, 24.75, 45.27),
  ("Image + Event + Place + EP Loss", "No", 7.06, 7.77, 6.37, 20.02, 31.60, 50.77),
  ("Image + Event + Place + PG", "No", 8.80, 9.19, 8.77, 17.35, 27.42, 47.37),
  ("Image + Event + Place + PG + EP Loss", "No", 10.21, 10.66, 11.86, 22.7, 33.90, 49.84),
  ("GT", "-", None, None, None, None, 74.34, 54.98),
)

# RealOOB Table 3 (test split; shared/specs/occlusion_boundaries.md section 7.4).
_OCC_TABLE3 = (
  ("DOC-HED", 0.531, 0.608, 0.407, 0.196, 0.208, 0.245, 0.075),
  ("DOOBNet", 0.747, 0.772, 0.786, 0.741, 0.396, 0.416, 0.264),
  ("OFNet", 0.748, 0.771, 0.785, 0.249, 0.371, 0.389, 0.227),
  ("P2ORM", 0.726, 0.750, 0.759, 0.248, 0.341, 0.362, 0.195),
  ("TPENet (adapted configuration)", 0.760, 0.776, 0.691, 0.318, 0.489, 0.502, 0.303),
  ("MoDOT (adapted configuration)", 0.673, 0.694, 0.702, 0.271, 0.236, 0.248, 0.093),
  ("DDN + orientation head", 0.764, 0.787, 0.818, 0.498, 0.496, 0.514, 0.390),
  ("DDN, boundary only", 0.812, 0.823, 0.841, 0.596, None, None, None),
  ("DiffusionEdge, boundary only", 0.770, 0.782, 0.695, 0.874, None, None, None),
  ("MEMO, boundary only", 0.705, 0.727, 0.334, 0.888, None, None, None),
)

# Per task: the evaluator whose metrics fill the table, label columns, (paper column, metric
# key) pairs, scale and decimals, and the reference lines (labels..., values...).
LAYOUTS = {
  "commonsense": {
    "title": "VisualCOMET Table 2 (val, x100)",
    "eval": "val",
    "labels": ("Modalities", "Text Given"),
    "columns": (
      ("B-2", "Bleu_2"),
      ("M", "METEOR"),
      ("C", "CIDEr"),
      ("Acc@50", "Acc@50"),
      ("Unique", "Unique"),
      ("Novel", "Novel"),
    ),
    "scale": 100.0,
    "digits": 2,
    "reference": "VisualCOMET paper, Table 2 (val)",
    "references": tuple((r[:2], r[2:]) for r in _VC_TABLE2),
  },
  "occlusion": {
    "title": "RealOOB Table 3 columns (test)",
    "eval": "test",
    "labels": ("Model",),
    "columns": tuple((k, k) for k in ("B-ODS", "B-OIS", "B-AP", "AC", "O-ODS", "O-OIS", "O-AP")),
    "scale": 1.0,
    "digits": 3,
    "reference": "RealOOB paper, Table 3 (test; other methods, sanity ranges)",
    "references": tuple((r[:1], r[1:]) for r in _OCC_TABLE3),
  },
  "video_relations": {
    "title": "Video relation detection and tagging (x100)",
    "eval": "val",
    "labels": ("Setting", "Tracks"),
    "columns": tuple((k, k) for k in ("mAP", "R@50", "R@100", "P@1", "P@5", "P@10")),
    "scale": 100.0,
    "digits": 2,
    "reference": "",
    "references": (),
  },
}


# ------------------------------------------------------------------------------------ reading
def _read_json(path):
  if not os.path.exists(path):
    return None
  try:
    with open(path) as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def load_sweep(workdir: str) -> dict:
  """The sweep file and, per row in order, its row.json, config, status and summary.

  Raises:
    cli_errors.InputError: W is not a sweep (no readable sweep.json).
  """
  path = os.path.join(workdir, SWEEP_FILE)
  if not os.path.exists(path):
    raise cli_errors.InputError(
      f"no {SWEEP_FILE}: not a sweep workdir (python -m relations.sweep ... --workdir W)",
      file=workdir,
    )
  sweep = cli_errors.read_json(path, "sweep file")
  rows = []
  for name in sweep.get("rows", []):
    d = os.path.join(workdir, name)
    rows.append(
      {
        "name": name,
        "dir": d,
        "row": _read_json(os.path.join(d, "row.json")) or {"row": name, "labels": {}},
        "config": _read_json(os.path.join(d, "config.json")) or {},
        "status": _read_json(os.path.join(d, "status.json")) or {},
        "summary": _read_json(os.path.join(d, "train_summary.json")),
      }
    )
  sweep["_rows"] = rows
  return sweep


def row_state(r: dict) -> str:
  """done | failed (exit N; log PATH) | missing [(running|interrupted|submitted ...)]."""
  st = r["status"]
  summary, total = r["summary"], r["config"].get("total_steps")
  finished = summary is not None and (
    total is None or int(summary.get("final_step", -1)) >= int(total)
  )  # a preempted run also writes a summary, without the final evaluation
  if finished and st.get("status") not in ("running", "failed"):
    return "done"
  if st.get("status") == "failed":
    return f"failed (exit {st.get('returncode', '?')}; log {st.get('log', '?')})"
  if st.get("status") in ("running", "interrupted", "submitted"):
    extra = f"job {st['job']}; " if st.get("job") else ""
    return f"missing ({st['status']}; {extra}log {st.get('log', '?')})"
  return "missing (not run)"


def _task(sweep: dict) -> str:
  for r in sweep["_rows"]:
    if r["config"].get("task"):
      return r["config"]["task"]
  return ""


def _layout(task: str, sweep: dict) -> dict:
  if task in LAYOUTS:
    return LAYOUTS[task]
  keys = sorted(
    {
      k
      for r in sweep["_rows"]
      for k, v in (r["summary"] or {}).items()
      if "/" in k and isinstance(v, (int, float))
    }
  )
  return {
    "title": task or "sweep",
    "eval": "",
    "labels": ("Row",),
    "columns": tuple((k, k) for k in keys),
    "scale": 1.0,
    "digits": 4,
    "reference": "",
    "references": (),
  }


def table(workdir: str) -> dict:
  """The report as data: {"title", "header", "lines", "references", "reference"}.

  Each line: {"labels": [...], "values": [float|None ...], "steps", "wall_s", "status", "row"}.
  """
  sweep = load_sweep(workdir)
  task = _task(sweep)
  lay = _layout(task, sweep)
  lines = []
  for r in sweep["_rows"]:
    labels = dict(r["row"].get("labels") or {})
    state = row_state(r)
    summary = r["summary"] if state == "done" else None
    modes = [""]
    if task == "video_relations":
      tracks = (r["config"].get("video") or {}).get("tracks", "both")
      modes = ["groundtruth", "detected"] if tracks == "both" else [tracks]
    for mode in modes:
      prefix = f"{lay['eval']}/{mode + '/' if mode else ''}" if lay["eval"] else ""
      values = []
      for _, key in lay["columns"]:
        v = (summary or {}).get(prefix + key)
        values.append(None if v is None else float(v) * lay["scale"])
      if mode:
        labels["Tracks"] = mode
      label_cells = [
        labels.get(
          c, r["row"].get("row") or "(default)" if c in ("Row", "Setting", "Model") else ""
        )
        for c in lay["labels"]
      ]
      lines.append(
        {
          "labels": label_cells,
          "values": values,
          "steps": (summary or {}).get("final_step"),
          "wall_s": r["status"].get("wall_s") if summary else None,
          "status": state,
          "row": r["row"].get("row", r["name"]),
        }
      )
  return {
    "title": f"{lay['title']}: sweep {sweep.get('hyper', '?')} of {sweep.get('config', '?')}",
    "header": list(lay["labels"]) + [c for c, _ in lay["columns"]],
    "digits": lay["digits"],
    "lines": lines,
    "reference": lay["reference"],
    "references": [
      {"labels": list(labels), "values": list(values)} for labels, values in lay["references"]
    ],
  }


# ------------------------------------------------------------------------------------ writing
def _fmt(v, digits, missing):
  return missing if v is None else f"{v:.{digits}f}"


def _wall(s):
  return "" if s is None else f"{s:.0f}"


def to_markdown(t: dict) -> str:
  head = t["header"] + ["steps", "wall (s)", "status"]
  out = [f"**{t['title']}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
  for ln in t["lines"]:
    cells = (
      ln["labels"]
      + [_fmt(v, t["digits"], "-") for v in ln["values"]]
      + ["" if ln["steps"] is None else str(ln["steps"]), _wall(ln["wall_s"]), ln["status"]]
    )
    out.append("| " + " | ".join(cells) + " |")
  if t["references"]:
    head = t["header"]
    out += ["", f"*Reference: {t['reference']}*", ""]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for ref in t["references"]:
      cells = ref["labels"] + [_fmt(v, t["digits"], "-") for v in ref["values"]]
      out.append("| " + " | ".join(cells) + " |")
  return "\n".join(out) + "\n"


def to_csv(t: dict) -> str:
  buf = io.StringIO()
  w = csv.writer(buf, lineterminator="\n")
  w.writerow(["source"] + t["header"] + ["steps", "wall_s", "status", "row"])
  for ln in t["lines"]:
    w.writerow(
      ["sweep"]
      + ln["labels"]
      + [_fmt(v, t["digits"], "") for v in ln["values"]]
      + [ln["steps"] if ln["steps"] is not None else "", _wall(ln["wall_s"]), ln["status"]]
      + [ln["row"]]
    )
  for ref in t["references"]:
    w.writerow(
      ["paper"] + ref["labels"] + [_fmt(v, t["digits"], "") for v in ref["values"]] + [""] * 4
    )
  return buf.getvalue()


def _tex_escape(s: str) -> str:
  for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#")):
    s = s.replace(a, b)
  return s


def to_tex(t: dict) -> str:
  n_lab = len(t["header"]) - len(t["lines"][0]["values"] if t["lines"] else [])
  cols = "l" * n_lab + "r" * (len(t["header"]) - n_lab) + "rrl"  # + steps, wall, status
  out = [
    f"% {_tex_escape(t['title'])}",
    r"\begin{tabular}{" + cols + "}",
    r"\toprule",
    " & ".join(_tex_escape(h) for h in t["header"] + ["Steps", "Wall (s)", "Status"]) + r" \\",
    r"\midrule",
  ]
  for ln in t["lines"]:
    status = "" if ln["status"] == "done" else ln["status"].split(" (", 1)[0]
    cells = (
      [_tex_escape(c) for c in ln["labels"]]
      + [_fmt(v, t["digits"], "--") for v in ln["values"]]
      + ["" if ln["steps"] is None else str(ln["steps"]), _wall(ln["wall_s"]), status]
    )
    out.append(" & ".join(cells) + r" \\")
  if t["references"]:
    out += [r"\midrule", rf"\multicolumn{{{len(cols)}}}{{l}}{{\emph{{{t['reference']}}}}} \\"]
    for ref in t["references"]:
      cells = [_tex_escape(c) for c in ref["labels"]] + [
        _fmt(v, t["digits"], "--") for v in ref["values"]
      ]
      out.append(" & ".join(cells + ["", "", ""]) + r" \\")
  out += [r"\bottomrule", r"\end{tabular}"]
  return "\n".join(out) + "\n"


FORMATS = {"md": to_markdown, "csv": to_csv, "tex": to_tex}


# ------------------------------------------------------------------------------------ PR curves
def _last_eval_dir(row_dir: str, eval_name: str, step) -> str | None:
  d = os.path.join(row_dir, "eval", eval_name, f"step_{step}")
  return d if step is not None and os.path.isdir(os.path.join(d, "boundaries")) else None


def occlusion_curves(workdir: str, out=sys.stderr) -> list[tuple[str, dict]]:
  """(label, curves) of every finished occlusion row, scoring its last predictions again with
  `python -m relations.evaluate occlusion` (cached in <row>/report/curves.json)."""
  sweep = load_sweep(workdir)
  got = []
  for r in sweep["_rows"]:
    if row_state(r) != "done":
      continue
    ec = (r["config"].get("evals") or {}).get("test") or {}
    pred = _last_eval_dir(r["dir"], "test", r["summary"].get("final_step"))
    gt = (r["config"].get("data") or {}).get("manual_dir")
    if not pred or not gt:
      continue
    cache = os.path.join(r["dir"], "report", "curves.json")
    if not os.path.exists(cache) or os.path.getmtime(cache) < os.path.getmtime(pred):
      cmd = [
        sys.executable,
        "-m",
        "relations.evaluate",
        "occlusion",
        "--gt",
        gt,
        "--pred",
        pred,
        "--split",
        ec.get("split", "test"),
        "--border",
        str(ec.get("border", 0)),
        "--valid-only" if ec.get("valid_only") else "--all-orientations",
        "--output",
        cache,
      ]
      res = subprocess.run(cmd, capture_output=True, text=True, check=False)
      if res.returncode:
        print(f"[report] {r['name']}: PR curves not scored: {res.stderr.strip()}", file=out)
        continue
    data = _read_json(cache) or {}
    if "curves" in data:
      label = (r["row"].get("labels") or {}).get("Model") or r["row"].get("row") or r["name"]
      got.append((label, data))
  return got


def plot_curves(rows: list[tuple[str, dict]], path: str) -> None:
  """One figure: boundary PR (left) and orientation PR (right), one line per row."""
  import matplotlib  # pylint: disable=g-import-not-at-top

  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top

  fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
  for i, (label, data) in enumerate(rows):
    curves = data["curves"]
    o_name = data.get("o_curve", "poc")
    for ax, name in zip(axes, ("boundary", o_name)):
      c = curves.get(name)
      if not c:
        continue
      ax.plot(c["R"], c["P"], lw=1.8, color=f"C{i % 10}", label=f"{label} (ODS {c['ODS']:.3f})")
      ax.plot([c["ODS_R"]], [c["ODS_P"]], "o", color=f"C{i % 10}", ms=4)
  for ax, title in zip(axes, ("Boundary PR", "Orientation PR")):
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="Recall", ylabel="Precision", title=title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower left", fontsize=7)
  fig.tight_layout()
  with io_util.atomic_path(path) as tmp:
    fig.savefig(tmp, format="png", dpi=110)
  plt.close(fig)


# ------------------------------------------------------------------------------------ CLI
def build_parser():
  p = cli_errors.ArgumentParser(
    prog="python -m relations.report",
    description="A sweep's final metrics in the paper's table layout.",
  )
  p.add_argument("workdir", type=cli_errors.existing_dir, help="the sweep's --workdir")
  p.add_argument("--format", choices=tuple(FORMATS), default="md")
  p.add_argument("--output", type=cli_errors.output_file, default=None, help="write it here")
  p.add_argument(
    "--plot",
    default=None,
    type=cli_errors.output_file,
    help="occlusion: the PR-curve figure (default WORKDIR/pr_curves.png)",
  )
  p.add_argument("--no-plot", action="store_true", help="occlusion: skip the PR-curve figure")
  return p


@cli_errors.entry_point
def main(argv=None) -> int:
  args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
  t = table(args.workdir)
  text = FORMATS[args.format](t)
  if args.output:
    io_util.write_text_atomic(args.output, text)
  else:
    sys.stdout.write(text)
  if _task(load_sweep(args.workdir)) == "occlusion" and not args.no_plot:
    rows = occlusion_curves(args.workdir)
    if rows:
      path = args.plot or os.path.join(args.workdir, "pr_curves.png")
      plot_curves(rows, path)
      print(f"[report] PR curves of {len(rows)} rows: {path}", file=sys.stderr)
  return 0


if __name__ == "__main__":
  sys.exit(main())
