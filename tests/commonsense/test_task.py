"""Task encoding (ablation inputs, visual slots) and the official JSON record."""

import json

import numpy as np
import pytest

from relations.commonsense.generation import official
from relations.commonsense import demo
from relations.commonsense import task
from relations.commonsense.text import tokenizer as tokenizer_lib

CORPUS = [
  "<|b_ev|> <|det1|> is talking to <|det3|> <|e_ev|>",
  "<|b_pl|> in a kitchen <|e_pl|>",
  "<|before|> put on the red apron <|e_in|>",
  "<|intent|> share a drink with <|det3|> <|e_in|>",
] * 20


@pytest.fixture(scope="module")
def config(tmp_path_factory):
  d = tmp_path_factory.mktemp("bpe")
  tokenizer_lib.train_bpe(tokenizer_lib.corpus_pieces(CORPUS), str(d), vocab_size=300)
  c = demo.demo_config(str(d))
  with c.unlocked():
    c.data.tokenizer_dir = str(d)
  return c


def _example(**kw):
  ex = {
    "event_name": b"<|det1|> is talking to <|det3|>",
    "place": b"in a kitchen",
    "relation": b"intent",
    "inference_text_name": b"share a drink with <|det3|>",
    "names": [b"person", b"tv", b"person", b"person"],
    "dets": np.array([0, 2], np.int32),
    "boxes": np.array(
      [[0, 0, 64, 128], [64, 0, 128, 32], [32, 64, 96, 128], [0, 0, 10, 10]], np.float32
    ),
    "width": 128,
    "height": 128,
    "image": np.zeros((128, 128, 3), np.uint8),
    "visual_features": np.arange(3 * 2048, dtype=np.float32).reshape(3, 2048),
  }
  ex.update(kw)
  return ex


def test_encode_layout_labels_and_slots(config):
  tok = task.tokenizer(config)
  lay = task.layout(config)
  out = task.encode(_example(), config)
  ids, labels = out["input_ids"], out["labels"]
  assert ids.shape == labels.shape == (lay.max_seq_len,)
  assert ids[0] == tok.token_to_id("<|b_img|>")
  assert ids[lay.event_start] == tok.token_to_id("<|b_ev|>")
  assert ids[lay.place_start] == tok.token_to_id("<|b_pl|>")
  assert ids[lay.relation_pos] == tok.token_to_id("<|intent|>")
  # Labels: the inference and <|e_in|>, not the relation token.
  lab = np.flatnonzero(labels != -1)
  assert lab[0] == lay.relation_pos + 1
  assert labels[lab[-1]] == tok.e_in_id
  np.testing.assert_array_equal(labels[lab], ids[lab])
  # Slots: image + detections 0 and 2 (both persons -> det1, det3).
  np.testing.assert_array_equal(out["slot_mask"][:4], [1, 1, 1, 0])
  np.testing.assert_array_equal(
    out["slot_person_ids"][:3], [tok.det_id(0), tok.det_id(1), tok.det_id(3)]
  )
  np.testing.assert_array_equal(out["visual_features"][:3], _example()["visual_features"])
  assert not out["visual_features"][3:].any()
  assert out["token_mask"][0] and not out["token_mask"][1]


def test_dropped_and_withheld_text_become_padding(config):
  lay = task.layout(config)
  tok = task.tokenizer(config)
  full = task.encode(_example(), config)
  with config.unlocked():
    config.inputs.event = False
  try:
    no_event = task.encode(_example(), config)
  finally:
    with config.unlocked():
      config.inputs.event = True
  seg = slice(lay.event_start, lay.place_start)
  assert (no_event["input_ids"][seg] == tok.eos_id).all()
  np.testing.assert_array_equal(
    no_event["input_ids"][lay.place_start :], full["input_ids"][lay.place_start :]
  )
  hidden = task.encode(_example(), config, text_given=False)
  assert (hidden["input_ids"][lay.event_start : lay.relation_pos] == tok.eos_id).all()
  assert not hidden["token_mask"][lay.event_start : lay.relation_pos].any()
  prompt = task.encode(_example(), config, with_labels=False)
  assert (prompt["labels"] == -1).all()
  assert (prompt["input_ids"][lay.prompt_len :] == tok.eos_id).all()


def test_ep_loss_labels_event_and_place(config):
  with config.unlocked():
    config.loss.mode = "all"
  try:
    out = task.encode(_example(), config)
  finally:
    with config.unlocked():
      config.loss.mode = "inference"
  lay = task.layout(config)
  tok = task.tokenizer(config)
  ev = out["labels"][lay.event_start : lay.place_start]
  assert ev[0] == -1 and tok.e_ev_id in ev  # begin token not labelled


def test_vit_inputs_normalise_boxes(config):
  with config.unlocked():
    config.model.visual = "vit"
  try:
    out = task.encode(_example(), config)
  finally:
    with config.unlocked():
      config.model.visual = "features"
  # uint8 on the host (4x fewer bytes between processes); the model normalises it.
  assert out["image"].shape == (64, 64, 3) and out["image"].dtype == np.uint8
  np.testing.assert_allclose(out["boxes"][:3], [[0, 0, 1, 1], [0, 0, 0.5, 1], [0.25, 0.5, 0.75, 1]])


def test_vit_decodes_the_training_size_copy_when_large_enough(config):
  """`image_small` (the image table's 256-px copy) is decoded instead of the JPEG when its short
  side covers `data.image_size`; otherwise the original is."""
  import cv2  # pylint: disable=g-import-not-at-top

  def jpeg(value, h, w):
    return cv2.imencode(".jpg", np.full((h, w, 3), value, np.uint8))[1].tobytes()

  ex = _example(image=jpeg(0, 320, 480), image_small=jpeg(255, 96, 144))  # black / white
  with config.unlocked():
    config.model.visual = "vit"
  try:
    for size, want in ((64, 255), (96, 255), (128, 0)):
      with config.unlocked():
        config.data.image_size = size
      out = task.encode(ex, config)
      assert out["image"].shape == (size, size, 3), size
      assert np.abs(out["image"].astype(int) - want).max() <= 2, size
  finally:
    with config.unlocked():
      config.model.visual = "features"
      config.data.image_size = 64


def test_official_record_maps_tags_back_and_cleans_line_breaks(config):
  tok = task.tokenizer(config)
  ex = {
    "img_fn": b"m/a.jpg",
    "movie": b"m",
    "metadata_fn": b"m/a.json",
    "split": b"val",
    "place": b"in a kitchen",
    "event": b"1 is talking to 3",
    "relation": b"intent",
    "event_idx": 4,
    "person_keys": [b"1", b"3"],
  }
  text = tok.encode("share a drink with <|det3|> <|e_in|>")
  row = text + [tok.eos_id] * (12 - len(text))
  ff = tok.token_to_id(tokenizer_lib.bytes_to_unicode()[0x0C])
  bad = tok.encode("take") + [ff] + tok.encode("break") + [tok.e_in_id]
  bad += [tok.eos_id] * (12 - len(bad))
  assert "\x0c" in tok.decode_generation(bad, {})  # what the model emitted
  rec = official.record(ex, [row, bad], tok)
  assert rec["generations"][0] == "share a drink with 3"
  assert rec["generations"][1] == tok.decode_generation(bad, {}).replace("\x0c", " ")
  assert rec["event_idx"] == 4 and rec["inference_relation"] == "intent"
  assert list(rec)[:6] == list(official.FIELDS)
  assert official.file_name("val") == "val_sample_1_num_5_top_k_0_top_p_0.9.json"
  json.dumps(rec)


@pytest.mark.parametrize("mode", ["inference", "all"])
@pytest.mark.parametrize("text_given", [True, False])
def test_continuation_does_not_depend_on_the_prompt(config, mode, text_given):
  # Acc@50 (`evaluator.acc50_scores`) encodes each distinct candidate once and reuses its ids,
  # labels and mask from the relation token on under every query's prompt; and it takes the
  # prompt from a generation encode. Both rest on this: the image, event and place segments are
  # cut or padded to their own widths, so the positions from the relation token on depend only on
  # the relation and the inference. Events and places shorter and longer than their widths.
  rel = task.layout(config).relation_pos
  long = " ".join(["in a kitchen"] * 40)
  prompts = [
    _example(),
    _example(event_name=b"<|det3|> is talking", place=long.encode()),
    _example(event_name=(" ".join(["<|det1|> is talking to <|det3|>"] * 20)).encode()),
  ]
  cands = [
    ("intent", "share a drink with <|det3|>"),
    ("before", "put on the red apron"),
    ("before", " ".join(["put on the red apron"] * 30)),  # longer than the inference width
  ]
  config = config.copy_and_resolve_references()
  with config.unlocked():
    config.loss.mode = mode
  for relation, name in cands:
    encs = [
      task.encode(p, config, inference_name=name, relation=relation, text_given=text_given)
      for p in prompts
    ]
    for k in ("input_ids", "labels", "token_mask"):
      for e in encs[1:]:
        np.testing.assert_array_equal(e[k][rel:], encs[0][k][rel:])
  for p in prompts:
    prompt = task.encode(p, config, with_labels=False, text_given=text_given)
    full = task.encode(
      p, config, inference_name="put on the red apron", relation="before", text_given=text_given
    )
    for k in ("input_ids", "token_mask"):
      np.testing.assert_array_equal(prompt[k][:rel], full[k][:rel])
    for k in ("slot_mask", "slot_person_ids", "visual_features"):
      np.testing.assert_array_equal(prompt[k], full[k])
