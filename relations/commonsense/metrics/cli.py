"""`python -m relations.evaluate commonsense`: score VisualCOMET generations.

  python -m relations.evaluate commonsense --annotations val_annots.json \\
      --generations GENS.json [--train-annotations train_annots.json] \\
      [--output metrics.json] [--no-meteor] [--meteor-workers N]

GENS.json is the official generation output (list of records with
``event_idx``, ``inference_relation``, ``generations``).  Prints a table and
writes JSON with the keys ``Bleu_1``..``Bleu_4``, ``METEOR``, ``CIDEr``,
``Unique``, ``Novel`` on pycocoevalcap's scale (fractions) plus the other
metrics under their own names (see captioning/protocol.py).
"""

import argparse
import json
import os
import sys

from relations.commonsense.metrics import protocol
from relations.io_util import write_json_atomic# pylint: disable=unused-import  (re-exported)

_ORDER = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4", "METEOR", "CIDEr", "Unique",
          "Novel", "Novel_normalised", "DIV1_set", "DIV2_set", "DIV1_corpus",
          "DIV2_corpus")
_NOTES = {"Novel": "official (asymmetric: raw training sentences)",
          "Novel_normalised": "NOT official: training sentences PTB-tokenised",
          "DIV1_set": "distinct-1 within each (event, relation), mean",
          "DIV2_set": "distinct-2 within each (event, relation), mean",
          "DIV1_corpus": "distinct-1 over all generations",
          "DIV2_corpus": "distinct-2 over all generations"}


def load_json(path: str, what: str):
  """Loads a JSON file, naming the file in every error."""
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    raise SystemExit(f"error: {what} file {path} does not exist") from None
  except json.JSONDecodeError as e:
    raise SystemExit(f"error: {what} file {path} is not valid JSON: "
                     f"{e}") from None


def format_table(metrics: dict) -> str:
  """Human-readable table: fraction and x100 (the paper's scale)."""
  lines = [f"{'metric':<18}{'value':>12}{'x100':>10}  note", "-" * 70]
  for key in _ORDER:
    if key not in metrics:
      continue
    value = metrics[key]
    if value is None:
      lines.append(f"{key:<18}{'n/a':>12}{'':>10}  "
                   f"{metrics.get('errors', {}).get(key, '')}")
    else:
      lines.append(f"{key:<18}{value:>12.6f}{100 * value:>10.2f}  "
                   f"{_NOTES.get(key, '')}")
  lines.append(f"hypotheses: {metrics['num_hypotheses']}  scored (event, "
               f"relation) pairs: {metrics['num_scored_pairs']}  skipped "
               f"(empty references): {metrics['num_skipped_pairs']}")
  return "\n".join(lines)


def main(argv=None) -> int:
  """CLI entry point; returns the exit status (0)."""
  run(argv)
  return 0


def run(argv=None) -> dict:
  """Parses `argv`, scores, prints the table; returns the metrics dict."""
  parser = argparse.ArgumentParser(
      prog="python -m relations.evaluate commonsense",
      description="VisualCOMET generation metrics (official protocol).")
  parser.add_argument("--annotations", required=True,
                      help="reference annotations, e.g. val_annots.json")
  parser.add_argument("--generations", required=True,
                      help="official generation output JSON")
  parser.add_argument("--train-annotations", default=None,
                      help="train_annots.json; enables Novel")
  parser.add_argument("--output", default=None, help="metrics JSON to write")
  parser.add_argument("--no-meteor", action="store_true",
                      help="skip METEOR (the only metric always needing Java)")
  parser.add_argument("--meteor-workers", type=int, default=None)
  args = parser.parse_args(argv)

  annotations = load_json(args.annotations, "annotations")
  generations = load_json(args.generations, "generations")
  train = (load_json(args.train_annotations, "train annotations")
           if args.train_annotations else None)
  if not isinstance(annotations, list):
    raise SystemExit(f"error: annotations file {args.annotations} must hold "
                     "a JSON list of event records")
  try:
    metrics = protocol.score_generations(
        annotations, generations, train, meteor=not args.no_meteor,
        meteor_workers=args.meteor_workers, gens_name=args.generations,
        annots_name=args.annotations)
  except protocol.ProtocolError as e:
    raise SystemExit(f"error: {e}") from None
  print(format_table(metrics))
  if args.output:
    write_json_atomic(args.output, metrics)
    print(f"wrote {args.output}")
  return metrics


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
