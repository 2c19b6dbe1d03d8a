"""`python -m relations.evaluate commonsense`: score VisualCOMET generations.

  python -m relations.evaluate commonsense --annotations val_annots.json \\
      --generations GENS.json [--train-annotations train_annots.json] \\
      [--output metrics.json] [--no-meteor] [--meteor-workers N] [--distinct-n] [--gt-row]
  python -m relations.evaluate commonsense --annotations val_annots.json \\
      --acc50 --candidates val_rank_random_50.json [--generations GENS.json]

GENS.json is the official generation output (list of records with
``event_idx``, ``inference_relation``, ``generations``).  Prints a table and
writes JSON with the keys ``Bleu_1``..``Bleu_4``, ``METEOR``, ``CIDEr``,
``Unique``, ``Novel`` on pycocoevalcap's scale (fractions) plus the other
metrics under their own names (see captioning/protocol.py).
"""

import sys

from relations import cli_errors
from relations.commonsense.metrics import java as java_lib
from relations.commonsense.metrics import protocol
from relations.commonsense.metrics import rank
from relations.io_util import write_json_atomic  # pylint: disable=unused-import  (re-exported)

_ORDER = (
  "Bleu_1",
  "Bleu_2",
  "Bleu_3",
  "Bleu_4",
  "METEOR",
  "CIDEr",
  "ROUGE_L",
  "Unique",
  "Novel",
  "Novel_normalised",
  "Acc@50",
  "DIV1_S",
  "DIV2_S",
  "DIV1_set",
  "DIV2_set",
  "DIV1_corpus",
  "DIV2_corpus",
  "Vocab",
  "Sent_Len",
  "GT_Vocab",
  "GT_Sent_Len",
)
# Table 6's vocabulary size and mean sentence length (words), not fractions.
_NOT_FRACTIONS = frozenset(("Vocab", "Sent_Len", "GT_Vocab", "GT_Sent_Len"))
_NOTES = {
  "ROUGE_L": "pycocoevalcap Rouge (LCS, beta 1.2)",
  "Vocab": "distinct words in the generations",
  "Sent_Len": "mean words per generation",
  "GT_Vocab": "distinct words in the references of the scored pairs",
  "GT_Sent_Len": "mean words per reference",
  "Novel": "official (asymmetric: raw training sentences)",
  "Novel_normalised": "NOT official: training sentences PTB-tokenised",
  "DIV1_S": "seed: distinct unigrams / words per 5-sentence set, mean",
  "DIV2_S": "seed: distinct bigrams / words per 5-sentence set, mean",
  "DIV1_set": "distinct-1 within each (event, relation), mean",
  "DIV2_set": "distinct-2 within each (event, relation), mean",
  "DIV1_corpus": "distinct-1 over all generations",
  "DIV2_corpus": "distinct-2 over all generations",
}


def load_json(path: str, what: str):
  """Loads a JSON file; every failure is a `cli_errors.InputError` naming the file."""
  return cli_errors.read_json(path, f"{what} JSON file")


def check_annotations(records, path: str, what: str, need_sentences: bool) -> None:
  """Refuses a wrong-shaped annotation file before anything is scored.

  Args:
    records: the parsed JSON.
    path: the file, for messages.
    what: "annotations" or "train annotations".
    need_sentences: the file must hold at least one intent/before/after sentence (a training
      file without any makes Novel = 1.0 for everything).

  Raises:
    cli_errors.InputError: naming the file, the record and the field.
  """
  if not isinstance(records, list):
    raise cli_errors.InputError(
      f"expected a JSON list of event records (as in the released {what} files), got a "
      f"JSON {type(records).__name__.replace('dict', 'object').replace('str', 'string')}",
      file=path,
    )
  if not records:
    raise cli_errors.InputError(
      f"empty list; expected the event records of a VisualCOMET {what} file", file=path
    )
  sentences = 0
  for i, rec in enumerate(records):
    if not isinstance(rec, dict):
      raise cli_errors.InputError(
        f"expected an event record (object with intent / before / after lists), got "
        f"{type(rec).__name__}: {str(rec)[:40]!r}",
        file=path,
        record=f"record {i}",
      )
    for rel in protocol.RELATIONS:
      if rel in rec:
        sents = rec[rel]
        if not isinstance(sents, list) or not all(isinstance(x, str) for x in sents):
          raise cli_errors.InputError(
            "expected a list of strings", file=path, record=f"record {i}", field=rel
          )
        sentences += len(sents)
  if need_sentences and not sentences:
    raise cli_errors.InputError(
      f"no intent / before / after sentence in {len(records)} records; expected the "
      f"{what} of VisualCOMET (needed for Novel)",
      file=path,
    )


def format_table(metrics: dict) -> str:
  """Human-readable table: fraction and x100 (the paper's scale)."""
  lines = [f"{'metric':<18}{'value':>12}{'x100':>10}  note", "-" * 70]
  for key in _ORDER:
    if key not in metrics:
      continue
    value = metrics[key]
    if value is None:
      lines.append(f"{key:<18}{'n/a':>12}{'':>10}  {metrics.get('errors', {}).get(key, '')}")
    elif key in _NOT_FRACTIONS:  # counts and lengths: no x100 column
      lines.append(f"{key:<18}{value:>12.2f}{'':>10}  {_NOTES.get(key, '')}")
    else:
      lines.append(f"{key:<18}{value:>12.6f}{100 * value:>10.2f}  {_NOTES.get(key, '')}")
  if "num_sentences" in metrics:  # the GT row
    lines.append(
      f"reference sentences: {metrics['num_sentences']}  sets (event, relation): "
      f"{metrics['num_sets']}"
    )
    return "\n".join(lines)
  lines.append(
    f"hypotheses: {metrics['num_hypotheses']}  scored (event, "
    f"relation) pairs: {metrics['num_scored_pairs']}  skipped "
    f"(empty references): {metrics['num_skipped_pairs']}"
  )
  return "\n".join(lines)


@cli_errors.entry_point
def main(argv=None) -> int:
  """CLI entry point; returns the exit status (0; 2 for bad input, one line on stderr)."""
  run(argv)
  return 0


def run(argv=None) -> dict:
  """Parses `argv`, scores, prints the table; returns the metrics dict."""
  parser = cli_errors.ArgumentParser(
    prog="python -m relations.evaluate commonsense",
    description="VisualCOMET generation metrics (official protocol).",
  )
  parser.add_argument(
    "--annotations",
    required=True,
    type=cli_errors.existing_file,
    help="reference annotations, e.g. val_annots.json",
  )
  parser.add_argument(
    "--generations",
    default=None,
    type=cli_errors.existing_file,
    help="official generation output JSON (required unless --acc50)",
  )
  parser.add_argument(
    "--train-annotations",
    default=None,
    type=cli_errors.existing_file,
    help="train_annots.json; enables Novel",
  )
  parser.add_argument(
    "--output", default=None, type=cli_errors.output_file, help="metrics JSON to write"
  )
  parser.add_argument(
    "--no-meteor",
    action="store_true",
    help="skip METEOR (the only metric always needing Java; the official "
    "PTB tokenisation still runs Java for captions its pure-Python path "
    "does not cover)",
  )
  parser.add_argument("--meteor-workers", type=cli_errors.int_in(1, 256), default=None)
  parser.add_argument(
    "--distinct-n",
    action="store_true",
    help="also DIV as distinct-n (distinct / total n-grams: DIV{1,2}_set, DIV{1,2}_corpus) next "
    "to the seed's DIV1_S / DIV2_S (distinct n-grams / words per set)",
  )
  parser.add_argument(
    "--gt-row",
    action="store_true",
    help="also score the references as generations (the tables' GT row: Unique, Novel, "
    "DIV, Vocab, Sent_Len), written under the key 'GT'",
  )
  parser.add_argument(
    "--acc50",
    action="store_true",
    help="Acc@50 from a ranking file in the official layout (--candidates)",
  )
  parser.add_argument(
    "--candidates",
    default=None,
    type=cli_errors.existing_file,
    help="with --acc50: <split>_rank_random_50.json as visual-comet scripts/run_rank.py (or our "
    "evaluator) writes it: {'mean_recall', 'results': [record + inference_candidate_indices, "
    "rank, num_gt, recall]}; candidate indices point into the expanded --annotations records",
  )
  args = parser.parse_args(argv)
  if args.acc50 != (args.candidates is not None):
    parser.error("--acc50 and --candidates FILE go together")
  if args.generations is None and not args.acc50:
    parser.error("the following arguments are required: --generations (or --acc50)")

  # Every file is read (and its JSON checked) before any is validated, in argument order.
  annotations = load_json(args.annotations, "annotations")
  generations = load_json(args.generations, "generations") if args.generations else None
  train = load_json(args.train_annotations, "train annotations") if args.train_annotations else None
  check_annotations(annotations, args.annotations, "annotations", need_sentences=False)
  acc50 = None
  if args.acc50:
    try:
      acc50 = rank.accuracy_from_official_results(args.candidates, annotations)
    except ValueError as e:
      raise cli_errors.InputError(str(e)) from None
    if generations is None:
      print(
        f"{'Acc@50':<18}{acc50['Acc@50']:>12.6f}{100 * acc50['Acc@50']:>10.2f}  "
        f"{acc50['num_queries']} queries"
      )
      if args.output:
        write_json_atomic(args.output, acc50)
        print(f"wrote {args.output}")
      return acc50
  if not any(rel in rec for rec in annotations for rel in protocol.RELATIONS):
    raise cli_errors.InputError(
      "no record has intent / before / after: a blind split (test_annots.json) cannot be "
      "scored here; its generation file is the leaderboard submission "
      "(python -m relations.predict ... --eval test writes and validates it)",
      file=args.annotations,
    )
  if train is not None:
    check_annotations(train, args.train_annotations, "train annotations", need_sentences=True)
  try:
    metrics = protocol.score_generations(
      annotations,
      generations,
      train,
      meteor=not args.no_meteor,
      meteor_workers=args.meteor_workers,
      gens_name=args.generations,
      annots_name=args.annotations,
      distinct_n=args.distinct_n,
    )
    if args.gt_row:
      metrics["GT"] = protocol.ground_truth_metrics(
        annotations, train, annots_name=args.annotations, distinct_n=args.distinct_n
      )
  except protocol.ProtocolError as e:
    raise cli_errors.InputError(str(e)) from None
  except java_lib.JavaNotFoundError as e:
    raise cli_errors.InputError(
      f"{e} (--no-meteor skips only METEOR; the official PTB tokenisation, used by every "
      "metric, runs the Stanford CoreNLP jar for these captions)"
    ) from None
  if acc50 is not None:
    metrics["Acc@50"] = acc50["Acc@50"]
    metrics["num_acc50_queries"] = acc50["num_queries"]
  print(format_table(metrics))
  if "GT" in metrics:
    print("\nGT (references scored as generations)")
    print(format_table(metrics["GT"]))
  if args.output:
    write_json_atomic(args.output, metrics)
    print(f"wrote {args.output}")
  return metrics


if __name__ == "__main__":
  sys.exit(main(sys.argv[1:]))
