"""The official VisualCOMET generation JSON, written atomically.

One record per (event, relation), ordered by event_idx then intent, before,
after (the generation expansion order):

  {"img_fn", "movie", "metadata_fn", "split", "place", "event",
   "inference_relation", "event_idx", "generations": [5 strings]}

Generated ids become text with the official post-processing
(`VisualCometTokenizer.decode_generation`: cut at `<|e_in|>`, structural
tokens removed, `<|detN|>` mapped back to the event's person numbers).
One deliberate addition: characters that the Stanford PTBTokenizer treats as
line breaks (which a byte-level model can emit, e.g. U+000C) become spaces.
The official scorer would otherwise split such a hypothesis into two lines
and misalign every later one; our exact scorer rejects it instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from relations import io_util
from relations.commonsense.metrics import ptb
from relations.commonsense.text import person_tags
from relations.commonsense.text import tokenizer as tokenizer_lib

FIELDS = ("img_fn", "movie", "metadata_fn", "split", "place", "event")


def file_name(
  split: str, num_samples: int = 5, top_k: int = 0, top_p: float = 0.9, do_sample: bool = True
) -> str:
  """Official name, e.g. `val_sample_1_num_5_top_k_0_top_p_0.9.json`.

  Beam search (`do_sample=False`) gives `val_sample_0_num_5_...`: the official
  script names the file by all its flags, used or not.
  """
  return f"{split}_sample_{int(do_sample)}_num_{num_samples}_top_k_{top_k}_top_p_{top_p}.json"


def clean_line_breaks(text: str) -> str:
  """Replaces every PTB line-break character by a space."""
  for ch in ptb.LINE_BREAKS:
    text = text.replace(ch, " ")
  return text


def record(
  example: dict, token_rows: Sequence[Sequence[int]], tok: tokenizer_lib.VisualCometTokenizer
) -> dict:
  """One output record from a `generation` builder example and its samples.

  Args:
    example: the builder example (event fields, relation, person_keys).
    token_rows: the sampled continuations (ids after the relation token;
      each exactly `max_new_tokens` long, padded after `<|e_in|>`).
    tok: the tokenizer.
  """
  name2person = person_tags.name2person_from_keys(
    [io_util.as_str(k) for k in example["person_keys"]]
  )
  out = {f: io_util.as_str(example[f]) for f in FIELDS}
  out["inference_relation"] = io_util.as_str(example["relation"])
  out["event_idx"] = int(example["event_idx"])
  out["generations"] = [
    clean_line_breaks(tok.decode_generation(list(r), name2person)) for r in token_rows
  ]
  return out


def write(path: str, records: list[dict]) -> None:
  """Writes the list to `path` via a temporary file and a rename."""
  io_util.write_json_atomic(path, records, indent=None, newline=False)


RELATIONS = ("intent", "before", "after")


def is_blind(annotations: Sequence[dict]) -> bool:
  """True for a split without references (the released test_annots.json: no record has an
  intent, before or after field)."""
  return not any(rel in rec for rec in annotations for rel in RELATIONS)


def validate_submission(
  records: Sequence[dict], annotations: Sequence[dict], num_samples: int, name: str = "submission"
) -> None:
  """Checks a generation list against the leaderboard's expectations.

  The leaderboard (allenai/mosaic-leaderboard visualcomet/evaluator/eval.py) reads
  ``refs[event_idx][inference_relation]`` of its hidden copy of the split for every record, so
  the file must hold, for every event of the split, each of the 3 relations exactly once, in the
  generation order (event_idx, then intent, before, after), each with `num_samples` strings, and
  ``img_fn`` / ``event`` must be those of annotation ``event_idx``.

  Raises:
    ValueError: naming the file (`name`), the record and the field.
  """
  want = [(e, rel) for e in range(len(annotations)) for rel in RELATIONS]
  if len(records) != len(want):
    raise ValueError(
      f"{name}: {len(records)} records, expected {len(want)} (3 relations x "
      f"{len(annotations)} events)"
    )
  for r, (rec, (e, rel)) in enumerate(zip(records, want)):
    where = f"{name}: record {r}"
    got = (rec.get("event_idx"), rec.get("inference_relation"))
    if got != (e, rel):
      raise ValueError(
        f"{where}: fields 'event_idx'/'inference_relation' are {got}, expected {(e, rel)}"
      )
    for field in ("img_fn", "event"):
      if rec.get(field) != annotations[e].get(field):
        raise ValueError(f"{where}: field {field!r} differs from annotation record {e}")
    gens = rec.get("generations")
    if (
      not isinstance(gens, list)
      or len(gens) != num_samples
      or not all(isinstance(g, str) for g in gens)
    ):
      raise ValueError(f"{where}: field 'generations' must be a list of {num_samples} strings")
