"""Category / predicate lists and their helpers."""

import pytest

from relations.video_relations.data import categories as vc


def test_lists_match_the_spec():
  assert len(vc.object_categories("vidor")) == 80
  assert len(vc.predicates("vidor")) == 50
  assert len(vc.object_categories("vidvrd")) == 35
  assert len(vc.predicates("vidvrd")) == 132
  # Spellings of the annotation files, not of the website CSV.
  for name in ("fruits", "vegetables", "backpack", "ball/sports_ball"):
    assert vc.is_object_category("vidor", name)
  for name in ("fruit", "vegetable", "backbag"):
    assert not vc.is_object_category("vidor", name)
  assert vc.is_predicate("vidor", "towards")
  assert not vc.is_predicate("vidor", "toward")
  assert vc.is_predicate("vidvrd", "toward")
  assert vc.VIDOR_SPATIAL_PREDICATES[-1] == "towards"
  assert vc.predicate_to_id("vidor")["play(instrument)"] == 49
  assert vc.object_to_id("vidvrd")["zebra"] == 34


def test_helpers():
  assert vc.dataset_of_video_id("ILSVRC2015_train_00010001") == "vidvrd"
  assert vc.dataset_of_video_id("5159741010") == "vidor"
  assert vc.is_spatial_predicate("next_to")
  assert not vc.is_spatial_predicate("ride")
  with pytest.raises(ValueError, match="unknown dataset 'coco'"):
    vc.predicates("coco")
