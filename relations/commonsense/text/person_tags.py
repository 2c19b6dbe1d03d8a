"""VisualCOMET person-tag conversion, byte-for-byte as the official code.

VisualCOMET text refers to people by VCR detection tags: "1 is talking to 3"
means detections 0 and 2 of the image's VCR metadata (tag N is detection
index N - 1, indexing *all* detections, not only persons). Before the text is
tokenised, every standalone all-digit token becomes a special token
`<|detN|>` ("forward"); after decoding, the special tokens are mapped back to
the digits ("backward").

The functions here reproduce `utils/file_utils.py` of jamespark3922/visual-comet
(commit 30eff8a8) exactly, including its quirks, because the released
checkpoint and the metric protocol depend on them:

* The punctuation splitting is `s.replace(',', ' , ').replace("'", " '")
  .replace('.', ' .').replace('?', ' ?').split()`; after the digit tokens are
  replaced, the words are joined with single spaces, `"'"` is split off
  *again* and `' .'` is glued back: "1's" -> "<|det1|>  's" (two spaces),
  "3." -> "<|det3|>.", "man, woman" -> "man , woman".
* *Every* `str.isdigit()` token is converted, also non-person numbers
  ("2 people" -> "<|det2|> people").
* The mapping itself has no upper bound: "57" becomes the text "<|det57|>".
  Only `<|det0|>`..`<|det49|>` are special tokens of the tokenizer
  (`NUM_DET_TOKENS`), so a tag >= 50 is tokenised as literal text by the BPE.
  `replace_names` maps it back to "57" like any other tag.
* The map of an event is built first and the tags of the inference sentence(s)
  are added to the same map (training: event + the one ground-truth inference;
  generation with references: event + all references of that relation).

The only deviation: the official code iterates a Python `set` of tags, so when
two different digit strings map to the same tag ("1" and "01") the reverse
map `name2person` depends on hash order. We keep first-occurrence order, which
makes the result deterministic and equal to one of the official outcomes.
"""

from typing import Optional

# `<|det0|>` (whole image) .. `<|det49|>` are tokenizer special tokens.
NUM_DET_TOKENS = 50


def det_token(n: int) -> str:
  """Returns the person-tag token string `<|detN|>` for integer `n`."""
  return '<|det%d|>' % n


def split_words(sent: str) -> list[str]:
  """The official punctuation splitting (step 1 of the forward mapping)."""
  return sent.replace(',', ' , ').replace("'", " '").replace('.', ' .').replace('?', ' ?').split()


def map_numbers_to_det_tokens(
  sent: str, person2name: Optional[dict[str, str]] = None
) -> tuple[dict[str, str], str]:
  """Forward mapping (official `_map_numbers_to_det_numbers`).

  Args:
    sent: raw VisualCOMET text (event or inference), e.g. "1 is talking to 3".
    person2name: an existing tag map (digit string -> `<|detN|>`) to extend,
      e.g. the event's map when converting an inference. Updated in place, as
      the official code does, and also returned.

  Returns:
    (person2name, converted sentence). person2name maps every digit token of
    `sent` (as written, e.g. "3" or "03") to `<|detN|>` with N = int(token).

  Raises:
    ValueError: a token for which `str.isdigit()` holds but `int()` fails (e.g.
      a superscript digit); the official code fails the same way.
  """
  tokens = split_words(sent)
  if person2name is None:
    person2name = {}
  for tok in tokens:
    if tok.isdigit():
      # Re-assigning an existing key keeps its first-occurrence position.
      person2name[tok] = det_token(int(tok))
  tokens = [person2name[t] if t.isdigit() else t for t in tokens]
  out = ' '.join(tokens).strip().replace("'", " '").replace(' .', '.')
  return person2name, out


def invert(person2name: dict[str, str]) -> dict[str, str]:
  """`name2person` of the official records: `<|detN|>` -> digit string."""
  return {v: k for k, v in person2name.items()}


def name2person_from_keys(keys) -> dict[str, str]:
  """Rebuilds `name2person` (`<|detN|>` -> digit string) from stored person2name keys.

  The builders store only the keys of an example's `person2name` (the digit strings as written,
  e.g. ["3", "1", "57"]); this is the reverse map `replace_names` needs after decoding.
  """
  return {det_token(int(k)): k for k in keys}


def replace_names(sent: str, name2person: dict[str, str]) -> str:
  """Backward mapping (official `replace_names`) after decoding.

  Every `<|detN|>` in `name2person` is replaced by its digit string, then any
  remaining `<|det` and `|>` are deleted, so a tag the event did not mention
  (`<|det7|>`) also becomes the bare number "7".

  Args:
    sent: decoded generation text, e.g. "talk to <|det3|>".
    name2person: `<|detN|>` -> digit string, from `invert(person2name)`.

  Returns:
    The text with numbers for tags, e.g. "talk to 3".
  """
  for name in name2person:
    sent = sent.replace(name, name2person[name])
  return sent.replace('<|det', '').replace('|>', '')


def tag_numbers(person2name: dict[str, str]) -> list[int]:
  """Sorted distinct integer tags of a map (for box selection).

  Tag N refers to VCR detection N - 1; tag 0 (`<|det0|>`) is the whole image.
  """
  return sorted({int(k) for k in person2name})


def encode_finetune_record(record: dict, event_idx: int) -> list[dict]:
  """Training expansion of one record (official `_encode_finetune_records`).

  Args:
    record: one annotation record (with `event`, and optionally `intent`,
      `before`, `after` lists).
    event_idx: the record's position in its `*_annots.json` list.

  Returns:
    One dict per ground-truth inference, relations in the order intent, before,
    after: the record's other fields plus `inference_relation`,
    `inference_text`, `event_name`, `inference_text_name`, `person2name`
    (event + this inference's tags) and `name2person`.
  """
  out = []
  relations = ('intent', 'before', 'after')
  for rel in relations:
    if rel not in record:
      continue
    for inference in record[rel]:
      info = {k: v for k, v in record.items() if k not in relations}
      info['event_idx'] = event_idx
      info['inference_relation'] = rel
      info['inference_text'] = inference
      p2n, event_name = map_numbers_to_det_tokens(info['event'])
      info['event_name'] = event_name
      p2n, inference_name = map_numbers_to_det_tokens(inference, p2n)
      info['inference_text_name'] = inference_name
      info['person2name'] = p2n
      info['name2person'] = invert(p2n)
      out.append(info)
  return out


def encode_generation_record(record: dict, event_idx: int) -> list[dict]:
  """Generation expansion of one event record (`_encode_generation_records`).

  Args:
    record: one annotation record.
    event_idx: the record's position in its `*_annots.json` list.

  Returns:
    Exactly three dicts (intent, before, after). Each has `event_name`,
    `inference_relation`, and, when the record has a non-empty list for that
    relation, `inference_text` / `inference_text_name` lists. `person2name`
    holds the event's tags plus the tags of those references: the official
    code extends the event map with them (so on val the box selection sees
    reference tags; on the blind test set only event tags).
  """
  out = []
  relations = ('intent', 'before', 'after')
  for rel in relations:
    info = {k: v for k, v in record.items() if k not in relations}
    info['event_idx'] = event_idx
    p2n, event_name = map_numbers_to_det_tokens(info['event'])
    info['event_name'] = event_name
    info['inference_relation'] = rel
    if rel in record and record[rel]:
      info['inference_text'] = []
      info['inference_text_name'] = []
      for inference in record[rel]:
        info['inference_text'].append(inference)
        p2n, name = map_numbers_to_det_tokens(inference, p2n)
        info['inference_text_name'].append(name)
    info['person2name'] = p2n
    info['name2person'] = invert(p2n)
    out.append(info)
  return out
