"""Synthetic VisualCOMET corpus: format, determinism, image-dependence."""

import filecmp
import json
import os

import numpy as np
import pytest
from PIL import Image

from relations.commonsense.data import synthetic as sc
from relations.commonsense.data.visualcomet import records
from relations.commonsense.text import sequence
from relations.commonsense.text import tokenizer as tokenizer_lib

SMALL = dict(
  train_images=8, val_images=4, test_images=2, image_size=96, vocab_size=400, verbose=False
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("sc") / "data")
  stats = sc.generate(out, seed=7, **SMALL)
  return out, stats


def _same_tree(a, b):
  cmp = filecmp.dircmp(a, b)
  if cmp.left_only or cmp.right_only or cmp.diff_files or cmp.funny_files:
    return False
  # dircmp compares shallowly by stat; compare bytes explicitly.
  for root, _, files in os.walk(a):
    for f in files:
      pa = os.path.join(root, f)
      pb = os.path.join(b, os.path.relpath(pa, a))
      if open(pa, "rb").read() != open(pb, "rb").read():
        return False
  return True


def test_deterministic_from_seed(corpus, tmp_path):
  out, _ = corpus
  again = str(tmp_path / "again")
  sc.generate(again, seed=7, **SMALL)
  assert _same_tree(out, again)
  other = str(tmp_path / "other")
  sc.generate(other, seed=8, **SMALL)
  assert (
    open(os.path.join(out, "train_annots.json")).read()
    != open(os.path.join(other, "train_annots.json")).read()
  )


def test_refuses_to_overwrite(corpus):
  out, _ = corpus
  with pytest.raises(FileExistsError, match="exists"):
    sc.generate(out, seed=7, **SMALL)


def test_official_layout_and_formats(corpus):
  out, _ = corpus
  for split, n in (("train", 16), ("val", 8), ("test", 4)):
    recs = records.load_annotations(os.path.join(out, f"{split}_annots.json"))
    assert len(recs) == n
    for r in recs:
      assert (
        set(r) >= {"img_fn", "movie", "metadata_fn", "split", "place", "event"}
        and r["split"] == split
      )
      assert (split == "test") == ("before" not in r)
      meta = records.load_metadata(os.path.join(out, "vcr1images", r["metadata_fn"]))
      img = Image.open(os.path.join(out, "vcr1images", r["img_fn"]))
      assert img.size == (96, 96) and img.format == "JPEG"
      feats = records.load_features(
        os.path.join(out, "features", records.image_id(r["img_fn"]) + ".pkl"), len(meta["names"])
      )
      assert feats["object_features"].shape == (len(meta["names"]), 2048)
      raw = json.load(open(os.path.join(out, "vcr1images", r["metadata_fn"])))
      assert all(len(b) == 5 for b in raw["boxes"])
      assert all(len(p[0]) == 4 and len(p[0][0]) == 2 for p in raw["segms"])
      # Events mention people (by their VCR tag) only.
      for tag in sequence.select_dets(
        meta["names"], [int(t) for t in r["event"].split() if t.isdigit()]
      ):
        assert meta["names"][tag] == "person"


def test_inferences_follow_visible_attributes(corpus):
  out, _ = corpus
  truth = json.load(open(os.path.join(out, "truth.json")))
  recs = json.load(open(os.path.join(out, "train_annots.json")))
  pools = (
    ("intent", sc.INTENT, "object"),
    ("before", sc.BEFORE, "colour"),
    ("after", sc.AFTER, "pose"),
  )
  for r in recs:
    s = int(r["event"].split()[0])
    det = truth[r["img_fn"]]["detections"][s - 1]
    assert det["name"] == "person"
    # No attribute word appears in the event text.
    words = set(r["event"].split())
    assert not words & (set(sc.COLOURS) | set(sc.OBJECTS) | {"sitting"})
    for rel, pool, attr in pools:
      templates = pool[det[attr]]
      for text in r[rel]:
        text = text.rstrip(".")
        assert any(_matches(t, text) for t in templates), (rel, text)


def _matches(template, text):
  t = template.split()
  w = text.split()
  if len(t) != len(w):
    return False
  for a, b in zip(t, w):
    if "{" in a:
      suffix = a[a.index("}") + 1 :]
      if not (b.endswith(suffix) and (b[: len(b) - len(suffix)].isdigit() or "{p}" in a)):
        return False
    elif a != b:
      return False
  return True


def test_subject_colour_visible_in_box(corpus):
  out, _ = corpus
  truth = json.load(open(os.path.join(out, "truth.json")))
  for img_fn, t in truth.items():
    img = np.asarray(Image.open(os.path.join(out, "vcr1images", img_fn)), np.float32)
    meta = json.load(open(os.path.join(out, "vcr1images", img_fn[:-4] + ".json")))
    for det, box in zip(t["detections"], meta["boxes"]):
      if det["name"] != "person":
        continue
      x1, y1, x2, y2 = (int(v) for v in box[:4])
      crop = img[y1 : y2 + 1, x1 : x2 + 1].reshape(-1, 3)
      dist = np.abs(crop - np.array(sc.COLOURS[det["colour"]])).sum(-1)
      assert (dist < 60).mean() > 0.08, (img_fn, det)


def test_tokenizer_and_layout_fit(corpus):
  out, stats = corpus
  tok = tokenizer_lib.VisualCometTokenizer.from_dir(os.path.join(out, "tokenizer"))
  assert tok.base_vocab_size == stats["tokens"]["bpe_base_vocab"] <= 400
  assert tok.token_to_id("<|b_img|>") == tok.base_vocab_size
  lay = sequence.Layout()
  assert stats["tokens"]["max_event"] <= lay.max_event
  assert stats["tokens"]["max_place"] <= lay.max_place
  # Round trip of a mapped event through the synthetic BPE.
  s = "<|det2|> is talking to <|det3|>"
  assert tok.decode(tok.encode(s)) == s


def test_statistics_and_cli(tmp_path, capsys):
  out = str(tmp_path / "cli")
  sc.main(["--out", out, "--seed", "1"])  # default demo size
  printed = capsys.readouterr().out
  stats = json.load(open(os.path.join(out, "stats.json")))
  assert stats["train"]["events"] == 240 and stats["val"]["events"] == 60
  assert stats["test"]["events"] == 30 and stats["test"]["inferences"] == 0
  assert stats["train"]["before_per_event"] == 4.0
  # Text alone barely predicts the attribute that selects the inferences;
  # the visual features do.
  text_acc = stats["text_only_attribute_accuracy"]
  probe = stats["feature_probe_accuracy"]
  assert max(text_acc.values()) < 0.5
  assert probe["colour"] > 0.9 and probe["pose"] > 0.9
  assert probe["object"] > text_acc["intent"] + 0.25
  assert "text only" in printed and "inferences" in printed
  assert f"wrote {out}" in printed
