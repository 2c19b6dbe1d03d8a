"""Event/place generation (target=event_place) and the event/place -> inference pipeline."""

import json
import os

import numpy as np
import pytest

from relations.commonsense import pipeline, task
from relations.commonsense.data import synthetic
from relations.train import config_util
from tests.commonsense.test_task import _example
from tests.train.test_sharded_eval import _checkpoint

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(ROOT, "configs", "commonsense.py")


def test_event_place_target_labels_only_event_and_place(tmp_path):
  from relations.commonsense.text import tokenizer as tokenizer_lib  # pylint: disable=g-import-not-at-top
  from tests.commonsense.test_task import CORPUS  # pylint: disable=g-import-not-at-top

  tokenizer_lib.train_bpe(tokenizer_lib.corpus_pieces(CORPUS), str(tmp_path), vocab_size=300)
  over = [f"data.tokenizer_dir={tmp_path}"]
  c = config_util.load_config(f"{CONFIG}:tiny,target=event_place", over)
  assert c.loss.mode == "all" and c.loss.target == "event_place"
  assert list(c.evals) == ["val"] and c.evals.val.type == "relations.commonsense.event_place"
  enc = task.encode(_example(), c)
  lay, tok = task.layout(c), task.tokenizer(c)
  labelled = np.flatnonzero(enc["labels"] != -1)
  assert labelled.size and labelled.max() < lay.relation_pos  # nothing of the inference
  assert tok.e_ev_id in enc["labels"] and tok.e_pl_id in enc["labels"]
  with pytest.raises(ValueError, match=r"Config arg 'target': unknown 'x'"):
    config_util.load_config(f"{CONFIG}:tiny,target=x", over)


@pytest.mark.slow
def test_pipeline_end_to_end_writes_its_metrics(tmp_path, capsys):
  data = str(tmp_path / "data")
  synthetic.generate(data, seed=4, train_images=2, val_images=2, test_images=1, verbose=False)
  common = [f"data.data_dir={tmp_path / 'tfds'}", f"data.manual_dir={data}"]
  ep_spec, inf_spec = f"{CONFIG}:tiny,target=event_place", f"{CONFIG}:tiny"
  _checkpoint(ep_spec, common, str(tmp_path / "ep"))
  _checkpoint(inf_spec, common, str(tmp_path / "inf"))
  out = str(tmp_path / "out")
  argv = ["--ep-config", ep_spec, "--ep-workdir", str(tmp_path / "ep"), "--config", inf_spec]
  argv += ["--workdir", str(tmp_path / "inf"), "--output", out, "--no-meteor"]
  argv += [x for o in common for x in ("--set", o)]
  assert pipeline.main(argv) == 0
  with open(os.path.join(out, "pipeline_metrics.json")) as f:
    got = json.load(f)
  with open(os.path.join(data, "val_annots.json")) as f:
    val = json.load(f)
  with open(os.path.join(out, "val_event_place.json")) as f:
    generated = json.load(f)
  assert [g["event_idx"] for g in generated] == list(range(len(val)))
  for field in ("event", "place"):
    m = got["event_place"][field]
    assert set(m) == {
      "CIDEr",
      "Bleu_4",
      "ROUGE_L",
      "Vocab",
      "Sent_Len",
      "GT_Vocab",
      "GT_Sent_Len",
      "num",
    }
    assert m["num"] == len(val) and 0.0 <= m["ROUGE_L"] <= 1.0
  inf = got["inference"]
  assert {"Bleu_2", "CIDEr", "ROUGE_L", "Unique", "DIV1_S"} <= set(inf)
  assert got["steps"] == {"event_place": 1, "inference": 1}
  # The inference model read the generated events, with the original references.
  with open(got["annotations"]) as f:
    fed = json.load(f)
  assert [r["event"] for r in fed] == [g["event"] for g in generated]
  assert [r["before"] for r in fed] == [r["before"] for r in val]
  assert os.path.exists(
    os.path.join(out, "inference", "step_1", "val_sample_1_num_5_top_k_0_top_p_0.9.json")
  )
  assert "wrote " + os.path.join(out, "pipeline_metrics.json") in capsys.readouterr().out
