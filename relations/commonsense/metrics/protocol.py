"""The official VisualCOMET generation-scoring protocol.

Mirrors ``compute_metric_inference`` of jamespark3922/visual-comet
scripts/evaluate_generation.py:

1. For each generation record, ``ref = annotations[event_idx][relation]``
   (all ground-truth sentences of that event and relation).  Records whose
   reference list is empty are skipped (before every metric, Unique and Novel
   included).
2. Each of the record's generations, with ``<|det`` and ``|>`` deleted, is a
   separate hypothesis scored against all of ``ref``.
3. References and hypotheses are PTB-tokenised (two separate tokenizer runs,
   as upstream), then BLEU-1..4 ('closest'), METEOR 1.5 and CIDEr-D are
   computed on the whole corpus, plus Unique/Novel and DIV.

Result keys follow pycocoevalcap: ``Bleu_1``..``Bleu_4``, ``METEOR``,
``CIDEr``, ``Unique``, ``Novel`` (fractions; CIDEr as its scorer returns it),
plus ``ROUGE_L`` (pycocoevalcap ``Rouge``), ``Vocab`` / ``Sent_Len`` of the
tokenised generations and ``GT_Vocab`` / ``GT_Sent_Len`` of the references of
the scored pairs (each pair's list once; Table 6), ``Novel_normalised``,
``DIV1_S``, ``DIV2_S`` (the seed's DIV; with ``distinct_n`` also ``DIV1_set``,
``DIV2_set``, ``DIV1_corpus``, ``DIV2_corpus``), ``num_hypotheses``, ``num_scored_pairs``,
``num_skipped_pairs``.  If Java is missing, METEOR is None and
``errors['METEOR']`` says why; the other metrics are still computed (PTB
tokenisation needs Java only for captions outside its pure-Python class).
"""

from concurrent import futures
import sys
from typing import Sequence

from relations.commonsense.metrics import bleu as bleu_lib
from relations.commonsense.metrics import cider as cider_lib
from relations.commonsense.metrics import diversity
from relations.commonsense.metrics import java as java_lib
from relations.commonsense.metrics import meteor as meteor_lib
from relations.commonsense.metrics import ptb
from relations.commonsense.metrics import rouge

RELATIONS = ("intent", "before", "after")


class ProtocolError(ValueError):
  """Malformed annotations or generations (names the record and field)."""


def collect_items(
  annotations: Sequence[dict],
  generations: Sequence[dict],
  gens_name: str = "generations",
  annots_name: str = "annotations",
):
  """Expands generation records into (hypothesis, references) items.

  Returns:
    (items, groups, skipped) where items is a list of (hyp, refs, record
    index, generation index) in official order, groups the list of raw
    hypothesis lists per scored record, skipped the number of records with
    an empty reference list.
  """
  if not isinstance(generations, list):
    raise ProtocolError(f"{gens_name}: expected a JSON list of records")
  items, groups, skipped = [], [], 0
  for r, rec in enumerate(generations):
    where = f"{gens_name}: record {r}"
    if not isinstance(rec, dict):
      raise ProtocolError(f"{where}: expected an object")
    for field in ("event_idx", "inference_relation", "generations"):
      if field not in rec:
        raise ProtocolError(f"{where}: missing field {field!r}")
    event_idx = rec["event_idx"]
    relation = rec["inference_relation"]
    gens = rec["generations"]
    if not isinstance(event_idx, int) or isinstance(event_idx, bool):
      raise ProtocolError(f"{where}: field 'event_idx' must be an integer")
    if not 0 <= event_idx < len(annotations):
      raise ProtocolError(
        f"{where}: field 'event_idx'={event_idx} is outside {annots_name} "
        f"(0..{len(annotations) - 1})"
      )
    if relation not in RELATIONS:
      raise ProtocolError(
        f"{where}: field 'inference_relation'={relation!r} is not one of {RELATIONS}"
      )
    if not isinstance(gens, list) or not all(isinstance(g, str) for g in gens):
      raise ProtocolError(f"{where}: field 'generations' must be a list of strings")
    annot = annotations[event_idx]
    if not isinstance(annot, dict) or relation not in annot:
      raise ProtocolError(
        f"{annots_name}: record {event_idx}: missing field {relation!r} "
        f"(needed by {gens_name} record {r}; references must contain all "
        "three relations)"
      )
    refs = annot[relation]
    if not isinstance(refs, list) or not all(isinstance(s, str) for s in refs):
      raise ProtocolError(
        f"{annots_name}: record {event_idx}: field {relation!r} must be a list of strings"
      )
    if not refs:
      skipped += 1
      continue
    groups.append(gens)
    for g, pred in enumerate(gens):
      pred = pred.replace("<|det", "").replace("|>", "")
      items.append((pred, tuple(refs), r, g))
  return items, groups, skipped


def _locate_error(e, items, gens_name, annots_name, generations, in_refs):
  """ProtocolError naming the record of a caption that broke the tokenizer."""
  if e.index < 0:
    return None
  if in_refs:
    pos = 0
    for _, refs, r, _ in items:
      if e.index < pos + len(refs):
        ev = generations[r]["event_idx"]
        rel = generations[r]["inference_relation"]
        return ProtocolError(f"{annots_name}: record {ev}: field {rel!r}: {e}")
      pos += len(refs)
    return None
  if e.index < len(items):
    _, _, r, g = items[e.index]
    return ProtocolError(f"{gens_name}: record {r}: field 'generations'[{g}]: {e}")
  return None


def _submit_tokenize(items, pool):
  """Starts PTB-tokenising references and hypotheses (two jar runs)."""
  ref_caps = [ref for _, refs, _, _ in items for ref in refs]
  hyp_caps = [hyp for hyp, _, _, _ in items]
  return [(pool.submit(ptb.tokenize, ref_caps), True), (pool.submit(ptb.tokenize, hyp_caps), False)]


def _tokenize_result(jobs, items, gens_name, annots_name, generations):
  """(hypotheses, reference tuples) from _submit_tokenize's jobs."""
  out = []
  for job, in_refs in jobs:
    try:
      out.append(job.result())
    except ptb.CaptionLineError as e:
      located = _locate_error(e, items, gens_name, annots_name, generations, in_refs)
      if located is None:
        raise
      raise located from e
  tok_refs, tok_hyps = out
  out_refs, pos = [], 0
  for _, refs, _, _ in items:
    out_refs.append(tuple(tok_refs[pos : pos + len(refs)]))
    pos += len(refs)
  return tok_hyps, out_refs


def score_generations(
  annotations: Sequence[dict],
  generations: Sequence[dict],
  train_annotations: Sequence[dict] | None = None,
  *,
  meteor: bool = True,
  meteor_workers: int | None = None,
  gens_name: str = "generations",
  annots_name: str = "annotations",
  distinct_n: bool = False,
) -> dict:
  """Scores VisualCOMET generations with the official protocol.

  Args:
    annotations: the reference ``*_annots.json`` list (event records).
    generations: the official generation output (records with
      ``event_idx``, ``inference_relation``, ``generations``).
    train_annotations: ``train_annots.json`` list; enables Novel.
    meteor: compute METEOR (needs Java).
    meteor_workers: METEOR processes (default: one per core).
    gens_name / annots_name: names used in error messages (file names).
    distinct_n: also report DIV as distinct-n (``DIV{1,2}_set`` / ``_corpus``) next to the
      seed's ``DIV1_S`` / ``DIV2_S``.

  Returns:
    Dict of metrics (see module docstring).
  """
  items, groups, skipped = collect_items(annotations, generations, gens_name, annots_name)
  if not items:
    raise ProtocolError(
      f"{gens_name}: nothing to score (no generation has a non-empty reference list)"
    )
  # The tokenizer jars for references and hypotheses run concurrently;
  # then METEOR's processes start, and the training sentences (for
  # Novel_normalised, needed last) and the Python metrics run meanwhile.
  with futures.ThreadPoolExecutor(2) as pool:
    train = train_tokens = None
    if train_annotations is not None:
      train = diversity.train_sentences(train_annotations)
    jobs = _submit_tokenize(items, pool)
    hyps, refs = _tokenize_result(jobs, items, gens_name, annots_name, generations)
    result = {"errors": {}}
    meteor_run = None
    if meteor:
      # METEOR runs in Java processes; score the rest meanwhile.
      try:
        meteor_run = meteor_lib.CorpusMeteor(hyps, refs, workers=meteor_workers)
      except java_lib.JavaNotFoundError as e:
        result["METEOR"] = None
        result["errors"]["METEOR"] = str(e)
        print(f"METEOR not computed: {e}", file=sys.stderr)
    if train is not None:
      train_tokens = pool.submit(ptb.tokenize, train)
    try:
      _python_metrics(result, hyps, refs, groups, train, train_tokens, distinct_n)
      if meteor_run is not None:
        result["METEOR"] = meteor_run.result()
    finally:
      if meteor_run is not None:
        meteor_run.close()
  result["num_hypotheses"] = len(hyps)
  result["num_scored_pairs"] = len(groups)
  result["num_skipped_pairs"] = skipped
  if not result["errors"]:
    del result["errors"]
  return result


def _python_metrics(result, hyps, refs, groups, train, train_tokens, distinct_n=False):
  """BLEU, CIDEr, Unique, Novel(s) and DIV into `result`."""
  bleus = bleu_lib.corpus_bleu(hyps, refs)
  for k, b in enumerate(bleus):
    result[f"Bleu_{k + 1}"] = b
  cider, _ = cider_lib.corpus_cider(hyps, refs)
  result["CIDEr"] = float(cider)
  result["ROUGE_L"] = float(rouge.corpus_rouge_l(hyps, refs)[0])
  result.update(rouge.vocab_stats(hyps))
  result["Unique"] = diversity.unique(hyps)
  # Tokenised generations of each scored record, for DIV.
  tok_groups, gt_sentences, pos = [], [], 0
  for g in groups:
    tok_groups.append(hyps[pos : pos + len(g)])
    if g:  # the pair's references, once per pair (items repeat them per generation)
      gt_sentences.extend(refs[pos])
    pos += len(g)
  if gt_sentences:  # Table 6's GT row: the references' vocabulary and length
    gt = rouge.vocab_stats(gt_sentences)
    result["GT_Vocab"], result["GT_Sent_Len"] = gt["Vocab"], gt["Sent_Len"]
  result.update(diversity.div_scores(tok_groups, distinct=distinct_n))
  if train is not None:
    result["Novel"] = diversity.novel(hyps, train)
    result["Novel_normalised"] = diversity.novel(hyps, train_tokens.result())


def ground_truth_metrics(
  annotations: Sequence[dict],
  train_annotations: Sequence[dict] | None = None,
  *,
  annots_name: str = "annotations",
  distinct_n: bool = False,
) -> dict:
  """The "GT" row of Tables 2, 5 and 6: the references scored as if they were generations.

  Every (event, relation) pair with a non-empty reference list is one set (as the 5 samples of
  a scored pair are); its sentences are PTB-tokenised like generations.

  Args:
    annotations: the reference ``*_annots.json`` list.
    train_annotations: ``train_annots.json`` list; enables Novel (official and normalised).
    annots_name: the file name used in error messages.
    distinct_n: also the distinct-n DIV variant.

  Returns:
    {"Unique", "DIV1_S", "DIV2_S", "Vocab", "Sent_Len", "num_sentences", "num_sets"} (+ "Novel",
    "Novel_normalised"; + distinct-n keys), fractions as in `score_generations`.

  Raises:
    ProtocolError: a malformed record (named) or no reference sentence at all.
  """
  sets = []
  for i, rec in enumerate(annotations):
    if not isinstance(rec, dict):
      raise ProtocolError(f"{annots_name}: record {i}: expected an object")
    for rel in RELATIONS:
      sents = rec.get(rel, [])
      if not isinstance(sents, list) or not all(isinstance(x, str) for x in sents):
        raise ProtocolError(f"{annots_name}: record {i}: field {rel!r} must be a list of strings")
      if sents:
        sets.append(sents)
  if not sets:
    raise ProtocolError(f"{annots_name}: no intent / before / after sentence (no GT row)")
  flat = [s for group in sets for s in group]
  train = diversity.train_sentences(train_annotations) if train_annotations is not None else []
  # One tokenizer run for both (the tokenizer is per line, so this equals two runs).
  tokens = ptb.tokenize(flat + train)
  tok, train_tokens = tokens[: len(flat)], tokens[len(flat) :]
  groups, pos = [], 0
  for group in sets:
    groups.append(tok[pos : pos + len(group)])
    pos += len(group)
  out = {"Unique": diversity.unique(tok)}
  if train_annotations is not None:
    out["Novel"] = diversity.novel(tok, train)
    out["Novel_normalised"] = diversity.novel(tok, train_tokens)
  out.update(diversity.div_scores(groups, distinct=distinct_n))
  out.update(rouge.vocab_stats(tok))
  out["num_sentences"] = len(tok)
  out["num_sets"] = len(groups)
  return out
