"""Test oracle: the official VisualCOMET protocol run on pycocoevalcap 1.2.

Re-states jamespark3922/visual-comet scripts/evaluate_generation.py
(compute_metric_inference with --diversity) on top of the pycocoevalcap
scorers, so that our numbers can be compared with theirs on the same inputs.
"""

import numpy as np
from pycocoevalcap.bleu.bleu import Bleu
from pycocoevalcap.cider.cider import Cider
from pycocoevalcap.meteor.meteor import Meteor
from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer


def same_id(sent):
  s = sent.replace("'", " '")
  s = " ".join("1" if g.isdigit() else g for g in s.split()).strip()
  return s.replace(" '", "'")


def official_metrics(annotations, generations, train=None, meteor=True):
  refs, preds, cnt = {}, {}, 0
  for rec in generations:
    ref = annotations[rec["event_idx"]][rec["inference_relation"]]
    if len(ref) > 0:
      for pred in rec["generations"]:
        pred = pred.replace("<|det", "").replace("|>", "")
        preds[cnt] = [{"caption": pred}]
        refs[cnt] = [{"caption": r} for r in ref]
        cnt += 1
  tok = PTBTokenizer()
  refs = tok.tokenize(refs)
  preds = tok.tokenize(preds)
  out = {}
  normed = [same_id(p[0]) for p in preds.values()]
  out["Unique"] = len(set(normed)) / len(normed)
  if train is not None:
    ts = set()
    for d in train:
      for r in ("intent", "before", "after"):
        for sent in d.get(r, []):
          ts.add(same_id(sent))
    out["Novel"] = np.mean([p not in ts for p in normed])
  scorers = [(Bleu(4), ["Bleu_1", "Bleu_2", "Bleu_3", "Bleu_4"]), (Cider(), "CIDEr")]
  if meteor:
    scorers.append((Meteor(), "METEOR"))
  for scorer, method in scorers:
    kwargs = {"verbose": 0} if isinstance(scorer, Bleu) else {}
    score, _ = scorer.compute_score(refs, preds, **kwargs)
    if isinstance(method, list):
      out.update(zip(method, score))
    else:
      out[method] = score
  return out, refs, preds
