"""The official VisualCOMET generation protocol on pycocoevalcap 1.2, for the metrics bench.

What jamespark3922/visual-comet `scripts/evaluate_generation.py` computes (its
`compute_metric_inference` with `--diversity`): every sampled generation of an
(event, relation) that has references is one hypothesis against all of those references,
person tags are stripped to their digits, both sides go through PTBTokenizer, then
Bleu 1-4, METEOR and CIDEr; Unique and Novel compare sentences whose person numbers are
all replaced by "1". The bench times this against `protocol.score_generations`.

The tests keep their own oracle (tests/commonsense/metrics/oracle.py) so that neither
side imports the other.
"""

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

BLEU_KEYS = ("Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4")


def _anonymised(sentence: str) -> str:
  """A sentence with every digit token read as "1" (the official Unique/Novel key)."""
  words = sentence.replace("'", " '").split()
  return " ".join("1" if w.isdigit() else w for w in words).replace(" '", "'")


def official_metrics(annotations, generations, train=None) -> dict[str, float]:
  """Scores `generations` against `annotations` as the official script does.

  Args:
    annotations: the split's records (list indexed by `event_idx`; relation -> references).
    generations: official generation records (`event_idx`, `inference_relation`,
      `generations`: sampled strings with `<|detN|>` tags).
    train: the training records, for Novel (omitted when None).

  Returns:
    {"Bleu_1".."Bleu_4", "METEOR", "CIDEr", "Unique"[, "Novel"]} -> float.
  """
  hyps, refs = {}, {}
  for record in generations:
    references = annotations[record["event_idx"]][record["inference_relation"]]
    if not references:
      continue
    for text in record["generations"]:
      key = len(hyps)
      hyps[key] = [{"caption": text.replace("<|det", "").replace("|>", "")}]
      refs[key] = [{"caption": r} for r in references]
  tokenizer = PTBTokenizer()
  refs, hyps = tokenizer.tokenize(refs), tokenizer.tokenize(hyps)
  keys = [_anonymised(h[0]) for h in hyps.values()]
  out = {"Unique": len(set(keys)) / len(keys)}
  if train is not None:
    seen = {
      _anonymised(s) for d in train for rel in ("intent", "before", "after") for s in d.get(rel, [])
    }
    out["Novel"] = float(np.mean([k not in seen for k in keys]))
  out.update(zip(BLEU_KEYS, Bleu(4).compute_score(refs, hyps, verbose=0)[0]))
  out["METEOR"] = Meteor().compute_score(refs, hyps)[0]
  out["CIDEr"] = Cider().compute_score(refs, hyps)[0]
  return out
