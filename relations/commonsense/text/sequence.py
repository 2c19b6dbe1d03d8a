"""The official fixed-width VisualCOMET sequence layout, as numpy arrays.

Reproduces `dataloaders/vcg.py` (`vcg_record_to_tokens`,
`_combine_and_pad_tokens`, `_create_partial_labels`, the `--no_text` masking
and the box selection of `get_dets_to_use`) of jamespark3922/visual-comet.

With the defaults (15 visual slots, max_event 39, max_place 22, length 128):

  position  0        `<|b_img|>`
            1..15    visual slots (`<|endoftext|>` ids; the model overwrites
                     the embeddings of slots 1..n_boxes with box features)
            16       `<|e_img|>`
            17..55   `<|b_ev|> event_name <|e_ev|>`, padded with eos
            56..77   `<|b_pl|> place <|e_pl|>`, padded with eos
            78       relation token (`<|before|>`/`<|intent|>`/`<|after|>`)
            79..     inference text, `<|e_in|>`, eos padding up to 127

Each field is tokenised separately from `" ".join([begin, text, end])`. An
over-long event or place is cut to max - 1 tokens and its end token
re-appended; the inference segment is never cut per segment, but if the whole
sequence is longer than max_seq_len it is cut and its last token set to
`<|e_in|>`. (`max_inference` only pads, and padding is followed by the same
eos padding up to max_seq_len, so it does not change the sequence.) There are
no token-type ids; position ids are 0..L-1. The generation prompt is the first
`relation_pos + 1` = 79 tokens.

Label convention (official, HF GPT-2 style): `labels[t]` is the id expected
at position t, -1 elsewhere; the model predicts `labels[t]` from the logits at
position t - 1 (shift inside the loss). Labelled: the inference tokens and
`<|e_in|>` (not the relation token); with mode "all" (EP loss) also the event
tokens through `<|e_ev|>` and the place tokens through `<|e_pl|>`.
"""

import dataclasses
from typing import Optional, Sequence

import numpy as np

from relations.commonsense.text import tokenizer as tokenizer_lib

IGNORE = -1
SEG_IMAGE, SEG_EVENT, SEG_PLACE, SEG_INFERENCE = 0, 1, 2, 3


@dataclasses.dataclass(frozen=True)
class Layout:
  """Segment widths. Defaults are the official generation/rank defaults."""

  num_max_boxes: int = 15
  max_event: int = 39
  max_place: int = 22
  max_inference: int = 23
  max_seq_len: int = 128

  @property
  def max_image(self) -> int:
    return self.num_max_boxes + 2

  @property
  def event_start(self) -> int:
    return self.max_image

  @property
  def place_start(self) -> int:
    return self.max_image + self.max_event

  @property
  def relation_pos(self) -> int:
    """Position of the relation token (78 with the defaults)."""
    return self.max_image + self.max_event + self.max_place

  @property
  def prompt_len(self) -> int:
    """Generation prompt length (79 with the defaults)."""
    return self.relation_pos + 1


DEFAULT_LAYOUT = Layout()


def segment_texts(
  event_name: str,
  place: str,
  relation: str,
  inference_text_name: Optional[str] = None,
  num_max_boxes: int = 15,
) -> list[str]:
  """The four field strings that are tokenised separately (official order).

  Args:
    event_name: event with person tags already mapped (`<|det1|> is ...`).
    place: raw place text.
    relation: 'intent', 'before' or 'after'.
    inference_text_name: mapped inference text; None for a generation prompt
      (the inference field is then only the relation token).
    num_max_boxes: visual slots.

  Returns:
    [image, event, place, inference] strings.
  """
  t = tokenizer_lib
  image = ' '.join([t.B_IMG] + [t.EOS] * num_max_boxes + [t.E_IMG])
  event = ' '.join([t.B_EV, event_name, t.E_EV])
  place_s = ' '.join([t.B_PL, place, t.E_PL])
  rel = t.RELATION_TOKENS[relation]
  if inference_text_name is None:
    inference = rel
  else:
    inference = ' '.join([rel, inference_text_name, t.E_IN])
  return [image, event, place_s, inference]


def tokenize_segments(
  tok: tokenizer_lib.VisualCometTokenizer, texts: Sequence[str]
) -> list[list[int]]:
  """Ids of each field string (see `segment_texts`)."""
  return [tok.encode(s) for s in texts]


def combine_and_pad(
  tok: tokenizer_lib.VisualCometTokenizer,
  segments: Sequence[Sequence[int]],
  layout: Layout = DEFAULT_LAYOUT,
) -> np.ndarray:
  """Official `_combine_and_pad_tokens` on ids.

  Args:
    tok: the tokenizer (for the end/pad ids).
    segments: [image, event, place, inference] id lists.
    layout: widths.

  Returns:
    int32 [max_seq_len] ids.
  """
  ends = (tok.e_img_id, tok.e_ev_id, tok.e_pl_id)
  widths = (layout.max_image, layout.max_event, layout.max_place, layout.max_inference)
  out = []
  for i, (seg, width) in enumerate(zip(segments, widths)):
    seg = list(seg)
    if len(seg) > width:
      if i < 3:
        seg = seg[: width - 1] + [ends[i]]
    else:
      seg += [tok.eos_id] * (width - len(seg))
    out.extend(seg)
  if len(out) > layout.max_seq_len:
    out = out[: layout.max_seq_len - 1] + [tok.e_in_id]
  else:
    out += [tok.eos_id] * (layout.max_seq_len - len(out))
  return np.asarray(out, np.int32)


def mask_text(tok: tokenizer_lib.VisualCometTokenizer, ids: np.ndarray) -> np.ndarray:
  """`--no_text`: ids from `<|b_ev|>` to the first `<|e_pl|>` become eos."""
  ids = np.array(ids)
  start = _first(ids, tok.b_ev_id, 'b_ev')
  end = _first(ids, tok.e_pl_id, 'e_pl')
  ids[start : end + 1] = tok.eos_id
  return ids


def partial_labels(
  tok: tokenizer_lib.VisualCometTokenizer, ids: np.ndarray, mode: str = 'inference'
) -> np.ndarray:
  """Official `_create_partial_labels`.

  Args:
    tok: the tokenizer.
    ids: int [L] sequence from `combine_and_pad` (after `mask_text` if used).
    mode: 'inference' (inference + `<|e_in|>`) or 'all' (EP loss: also event
      and place spans including their end tokens).

  Returns:
    int32 [L] labels, IGNORE (-1) where not labelled.

  Raises:
    ValueError: not exactly one relation token, or a missing end token.
  """
  ids = np.asarray(ids)
  labels = np.full(ids.shape, IGNORE, np.int32)
  rel = [r for r in tok.relation_ids.values() if (ids == r).any()]
  if len(rel) != 1:
    raise ValueError(f'Expected one relation token, found {len(rel)}.')
  spans = [(rel[0], tok.e_in_id)]
  if mode == 'all':
    spans += [(tok.b_ev_id, tok.e_ev_id), (tok.b_pl_id, tok.e_pl_id)]
  elif mode != 'inference':
    raise ValueError(f'mode must be "inference" or "all", got {mode!r}')
  for begin, end in spans:
    s, e = _first(ids, begin, 'begin'), _first(ids, end, 'end')
    labels[s + 1 : e + 1] = ids[s + 1 : e + 1]
  return labels


def _first(ids: np.ndarray, value: int, what: str) -> int:
  hits = np.flatnonzero(ids == value)
  if not hits.size:
    raise ValueError(f'Token id {value} ({what}) not in sequence.')
  return int(hits[0])


def segment_ids(layout: Layout = DEFAULT_LAYOUT) -> np.ndarray:
  """int32 [max_seq_len]: SEG_IMAGE/EVENT/PLACE/INFERENCE by position."""
  seg = np.full(layout.max_seq_len, SEG_INFERENCE, np.int32)
  seg[: layout.event_start] = SEG_IMAGE
  seg[layout.event_start : layout.place_start] = SEG_EVENT
  seg[layout.place_start : layout.relation_pos] = SEG_PLACE
  return seg


def token_mask(
  tok: tokenizer_lib.VisualCometTokenizer, ids: np.ndarray, layout: Layout = DEFAULT_LAYOUT
) -> np.ndarray:
  """bool [L]: True for real text tokens, False for eos padding and slots.

  The visual slots 1..num_max_boxes are False (the model decides which hold
  boxes); `<|b_img|>`/`<|e_img|>` and all begin/end tokens are True. With
  `mask_text` the masked event/place span is False. For the improved
  attention mask over padding (the official code attends to everything).
  """
  return np.asarray(ids) != tok.eos_id


def encode(
  tok: tokenizer_lib.VisualCometTokenizer,
  event_name: str,
  place: str,
  relation: str,
  inference_text_name: Optional[str] = None,
  layout: Layout = DEFAULT_LAYOUT,
  mode: str = 'inference',
  include_text: bool = True,
) -> dict[str, np.ndarray]:
  """One example in the official layout.

  Args:
    tok: the tokenizer.
    event_name: tag-mapped event (`person_tags.map_numbers_to_det_tokens`).
    place: place text.
    relation: 'intent' | 'before' | 'after'.
    inference_text_name: mapped inference text, or None for a generation
      prompt (labels are then all IGNORE).
    layout: widths.
    mode: label mode, 'inference' or 'all' (EP loss).
    include_text: False for the `--no_text` ablation (event/place masked).

  Returns:
    dict of numpy arrays, L = layout.max_seq_len:
      input_ids int32 [L]; labels int32 [L] (IGNORE = -1; unshifted);
      position_ids int32 [L] (0..L-1); segment_ids int32 [L];
      token_mask bool [L]; relation_pos int32 [] (78 by default);
      prompt_len int32 [] (relation_pos + 1).
  """
  texts = segment_texts(event_name, place, relation, inference_text_name, layout.num_max_boxes)
  ids = combine_and_pad(tok, tokenize_segments(tok, texts), layout)
  if not include_text:
    ids = mask_text(tok, ids)
  if inference_text_name is None:
    labels = np.full(ids.shape, IGNORE, np.int32)
  else:
    labels = partial_labels(tok, ids, mode)
  return dict(
    input_ids=ids,
    labels=labels,
    position_ids=np.arange(layout.max_seq_len, dtype=np.int32),
    segment_ids=segment_ids(layout),
    token_mask=token_mask(tok, ids, layout),
    relation_pos=np.int32(layout.relation_pos),
    prompt_len=np.int32(layout.prompt_len),
  )


def select_dets(
  names: Sequence[str], tags: Sequence[int], only_use_relevant_dets: bool = True
) -> np.ndarray:
  """Official `get_dets_to_use`: VCR detection indices for the visual slots.

  Args:
    names: VCR metadata `names` (class per detection).
    tags: integer person tags of the record (`person_tags.tag_numbers` of its
      `person2name`); tag N selects detection N - 1 when it exists.
    only_use_relevant_dets: False = all detections.

  Returns:
    int64 [n] ascending detection indices; all `person` detections if no tag
    selects anything. Not yet truncated (see `slot_dets`).
  """
  n = len(names)
  if not only_use_relevant_dets:
    return np.arange(n)
  use = np.zeros(n, bool)
  for tag in tags:
    if 0 <= tag - 1 < n:
      use[tag - 1] = True
  if not use.any():
    use = np.array([x == 'person' for x in names], bool).reshape(n)
  return np.flatnonzero(use)


def slot_dets(dets: np.ndarray, num_max_boxes: int = 15) -> np.ndarray:
  """Detections that get a slot: slot 0 is the whole image, so <= 14."""
  return np.asarray(dets)[: num_max_boxes - 1]


def slot_person_ids(
  tok: tokenizer_lib.VisualCometTokenizer,
  names: Sequence[str],
  dets: np.ndarray,
  num_max_boxes: int = 15,
) -> np.ndarray:
  """Person-grounding token ids per visual slot (official `person_ids`).

  Args:
    tok: the tokenizer.
    names: VCR `names`.
    dets: detection indices of the slots after the image slot (`slot_dets`).
    num_max_boxes: number of slots.

  Returns:
    int32 [num_max_boxes]: slot 0 = `<|det0|>`; a person detection i =
    `<|det{i+1}|>` (eos id if i + 1 >= 50, as 2.4.1 maps unknown tokens to
    unk); a non-person detection = 0 (the official code's default, i.e. the
    embedding of token id 0); empty slots = 0.
  """
  ids = np.zeros(num_max_boxes, np.int32)
  ids[0] = tok.det_id(0)
  for k, d in enumerate(np.asarray(dets)[: num_max_boxes - 1]):
    if names[d] == 'person':
      ids[k + 1] = tok.det_id(int(d) + 1)
  return ids


def visual_slots(
  tok: tokenizer_lib.VisualCometTokenizer,
  names: Sequence[str],
  boxes: np.ndarray,
  dets: np.ndarray,
  width: int,
  height: int,
  num_max_boxes: int = 15,
) -> dict[str, np.ndarray]:
  """Everything the model needs for the visual slots of one example.

  Slot 0 is the whole image (box [0, 0, width, height], `<|det0|>`), slots
  1.. are `slot_dets(dets)` in order; the rest is padding. The slots go to
  sequence positions 1..num_max_boxes (`<|b_img|>` is position 0).

  Args:
    tok: the tokenizer.
    names: VCR `names` of all detections.
    boxes: float [N, 4] x1, y1, x2, y2 pixels of all detections.
    dets: the example's `dets` (official selection, not truncated).
    width, height: image size in pixels.
    num_max_boxes: number of slots.

  Returns:
    boxes float32 [S, 4] pixels (zeros in padding); mask bool [S];
    person_ids int32 [S] (`slot_person_ids`); det_index int32 [S] (VCR
    detection index, -1 for the image slot and padding); S = num_max_boxes.
  """
  kept = slot_dets(dets, num_max_boxes)
  n = 1 + len(kept)
  out_boxes = np.zeros((num_max_boxes, 4), np.float32)
  out_boxes[0] = (0, 0, width, height)
  if len(kept):
    out_boxes[1:n] = np.asarray(boxes, np.float32).reshape(-1, 4)[kept]
  det_index = np.full(num_max_boxes, -1, np.int32)
  det_index[1:n] = kept
  return dict(
    boxes=out_boxes,
    mask=np.arange(num_max_boxes) < n,
    person_ids=slot_person_ids(tok, names, kept, num_max_boxes),
    det_index=det_index,
  )
