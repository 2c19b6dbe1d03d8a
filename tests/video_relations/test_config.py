"""configs/video_relations.py: variants and ablation args."""

import pytest

from relations.train import config_util

SPEC = "configs/video_relations.py"


def test_paper_and_tiny_variants():
  paper = config_util.load_config(f"{SPEC}:paper")
  assert paper.model.vit_variant == "B/16"
  assert (paper.video.segment_length, paper.video.segment_stride) == (30, 15)
  assert paper.video.association_threshold == 0.5
  assert paper.model.num_classes == 80 and paper.model.num_predicates == 50
  tiny = config_util.load_config(f"{SPEC}:tiny")
  assert tiny.model.vit_variant == "" and tiny.model.vit.patch_size == 8
  assert tiny.task == "video_relations" and tiny.evals.val.type == "video_relations"


def test_ablation_args():
  c = config_util.load_config(
    f"{SPEC}:tiny,motion=false,seg_len=30,assoc=0.3,queries=8,tracks=detected"
  )
  assert c.model.use_motion is False
  assert (c.video.segment_length, c.video.segment_stride) == (30, 15)
  assert c.video.association_threshold == 0.3
  assert c.model.num_queries == 8 and c.video.tracks == "detected"
  v = config_util.load_config(f"{SPEC}:dataset=vidvrd")
  assert (v.model.num_classes, v.model.num_predicates) == (35, 132)
  # ImageNet-VidVRD has train / test only: one evaluator, `test`.
  assert v.evals.test.split == "test" and "val" not in v.evals and v.input.flip_prob == 0.0
  assert config_util.load_config(SPEC).evals.test.split == "test"


def test_bad_args_name_the_key():
  with pytest.raises(ValueError, match="'dataset'"):
    config_util.load_config(f"{SPEC}:dataset=coco")
  with pytest.raises(ValueError, match="'queries'"):
    config_util.load_config(f"{SPEC}:queries=many")
