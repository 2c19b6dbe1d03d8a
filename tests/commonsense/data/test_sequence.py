"""Official fixed-width sequence layout on known answers."""

import numpy as np
import pytest

from relations.commonsense.text import sequence


def test_layout_positions():
  lay = sequence.Layout()
  assert (lay.max_image, lay.event_start, lay.place_start, lay.relation_pos, lay.prompt_len) == (
    17,
    17,
    56,
    78,
    79,
  )
  seg = sequence.segment_ids(lay)
  assert seg.shape == (128,)
  assert (seg[:17] == 0).all() and (seg[17:56] == 1).all()
  assert (seg[56:78] == 2).all() and (seg[78:] == 3).all()


def test_encode_known_answer(tok):
  ex = sequence.encode(
    tok,
    "<|det1|> is trying to talk to <|det2|>",
    "at a fancy party",
    "before",
    "approach <|det3|> at an event",
  )
  ids, labels = ex["input_ids"], ex["labels"]
  eos = tok.eos_id
  assert ids.dtype == np.int32 and ids.shape == (128,)
  assert ids[0] == tok.b_img_id and ids[16] == tok.e_img_id
  assert (ids[1:16] == eos).all()
  event = [tok.b_ev_id] + tok.encode("<|det1|> is trying to talk to <|det2|>")
  event += [tok.e_ev_id]
  np.testing.assert_array_equal(ids[17 : 17 + len(event)], event)
  assert (ids[17 + len(event) : 56] == eos).all()
  place = [tok.b_pl_id] + tok.encode("at a fancy party") + [tok.e_pl_id]
  np.testing.assert_array_equal(ids[56 : 56 + len(place)], place)
  assert ids[78] == tok.relation_ids["before"]
  inf = tok.encode("approach <|det3|> at an event") + [tok.e_in_id]
  np.testing.assert_array_equal(ids[79 : 79 + len(inf)], inf)
  assert (ids[79 + len(inf) :] == eos).all()
  # Labels: inference tokens + <|e_in|>, not the relation token.
  want = np.full(128, -1)
  want[79 : 79 + len(inf)] = inf
  np.testing.assert_array_equal(labels, want)
  assert ex["relation_pos"] == 78 and ex["prompt_len"] == 79
  np.testing.assert_array_equal(ex["position_ids"], np.arange(128))
  mask = ex["token_mask"]
  assert mask[0] and not mask[1:16].any() and mask[16]
  assert mask.sum() == 2 + len(event) + len(place) + 1 + len(inf)


def test_ep_labels_and_no_text(tok):
  ex = sequence.encode(tok, "<|det1|> is here", "at a party", "intent", "dance", mode="all")
  ids, labels = ex["input_ids"], ex["labels"]
  n_ev = 1 + len(tok.encode("<|det1|> is here"))  # tokens + <|e_ev|>
  np.testing.assert_array_equal(labels[18 : 18 + n_ev], ids[18 : 18 + n_ev])
  assert labels[17] == -1 and labels[18 + n_ev] == -1
  n_pl = 1 + len(tok.encode("at a party"))
  np.testing.assert_array_equal(labels[57 : 57 + n_pl], ids[57 : 57 + n_pl])
  assert labels[56] == -1 and labels[78] == -1 and labels[79] == ids[79]
  masked = sequence.encode(
    tok, "<|det1|> is here", "at a party", "intent", "dance", include_text=False
  )
  assert (masked["input_ids"][17:78] == tok.eos_id).all()
  np.testing.assert_array_equal(masked["input_ids"][78:], ids[78:])
  np.testing.assert_array_equal(masked["labels"][79:], labels[79:])
  with pytest.raises(ValueError, match="b_ev|begin"):
    sequence.encode(tok, "x", "y", "intent", "z", mode="all", include_text=False)


def test_truncation(tok):
  long_event = " ".join(["party"] * 60)
  ex = sequence.encode(tok, long_event, "at a party", "after", "dance")
  ids = ex["input_ids"]
  assert ids[55] == tok.e_ev_id and ids[56] == tok.b_pl_id
  assert ids[78] == tok.relation_ids["after"]
  # The inference segment is not cut per segment; the whole sequence is.
  long_inf = " ".join(["woman"] * 80)
  ex = sequence.encode(tok, "here", "there", "after", long_inf)
  ids = ex["input_ids"]
  assert ids[127] == tok.e_in_id and (ids[79:127] != tok.eos_id).all()
  assert ex["labels"][127] == tok.e_in_id


def test_prompt_is_prefix_of_training_sequence(tok):
  full = sequence.encode(tok, "<|det1|> is here", "at a party", "intent", "dance")
  prompt = sequence.encode(tok, "<|det1|> is here", "at a party", "intent")
  np.testing.assert_array_equal(prompt["input_ids"][:79], full["input_ids"][:79])
  assert (prompt["input_ids"][79:] == tok.eos_id).all()
  assert (prompt["labels"] == -1).all()


def test_box_selection_and_person_ids(tok):
  names = ["person", "chair", "person", "person"]
  # Tag 2 is the chair (tags index all detections); tag 9 does not exist.
  np.testing.assert_array_equal(sequence.select_dets(names, [2, 3, 9]), [1, 2])
  # No usable tag: all people.
  np.testing.assert_array_equal(sequence.select_dets(names, [0, 9]), [0, 2, 3])
  np.testing.assert_array_equal(
    sequence.select_dets(names, [1], only_use_relevant_dets=False), [0, 1, 2, 3]
  )
  pid = sequence.slot_person_ids(tok, names, np.array([1, 2]))
  assert pid.shape == (15,)
  assert pid[0] == tok.det_id(0) and pid[1] == 0
  assert pid[2] == tok.det_id(3) and (pid[3:] == 0).all()
  many = ["person"] * 60
  dets = sequence.slot_dets(np.arange(60))
  assert len(dets) == 14
  pid = sequence.slot_person_ids(tok, many, np.arange(48, 60))
  assert pid[1] == tok.det_id(49) and pid[2] == tok.eos_id  # det50 is unk


def test_visual_slots(tok):
  names = ["person", "chair", "person"]
  boxes = np.array([[1, 2, 10, 20], [3, 3, 5, 5], [20, 2, 30, 40]], np.float32)
  v = sequence.visual_slots(tok, names, boxes, np.array([0, 1, 2]), 48, 40)
  np.testing.assert_array_equal(v["boxes"][:4], [[0, 0, 48, 40], boxes[0], boxes[1], boxes[2]])
  assert (v["boxes"][4:] == 0).all() and v["boxes"].shape == (15, 4)
  np.testing.assert_array_equal(v["mask"], np.arange(15) < 4)
  np.testing.assert_array_equal(v["det_index"][:5], [-1, 0, 1, 2, -1])
  np.testing.assert_array_equal(
    v["person_ids"][:4], [tok.det_id(0), tok.det_id(1), 0, tok.det_id(3)]
  )
  many = sequence.visual_slots(
    tok, ["person"] * 20, np.tile(boxes[:1], (20, 1)), np.arange(20), 48, 40
  )
  assert many["mask"].all() and many["det_index"][-1] == 13
