"""Synthetic VidOR generator: exact layout, real MP4s, determinism, coverage
of categories/predicates/data faults, and the geometric relation rules."""

import collections
import filecmp
import json
import os

import av
import numpy as np
import pytest

from relations.video_relations.data import synthetic as synthetic_vidor
from relations.video_relations.data import synthetic_relations as rel_lib
from relations.video_relations.data import synthetic_scene as scene_lib
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.data import annotations as vrd_json

SMALL = dict(width=64, height=48, min_frames=24, max_frames=32)


def _files(root):
  out = []
  for d, _, names in os.walk(root):
    out += [os.path.relpath(os.path.join(d, n), root) for n in names]
  return sorted(out)


def test_deterministic_from_seed(tmp_path):
  synthetic_vidor.generate(str(tmp_path / "a"), 3, 1, seed=5, **SMALL)
  synthetic_vidor.generate(str(tmp_path / "b"), 3, 1, seed=5, **SMALL)
  synthetic_vidor.generate(str(tmp_path / "c"), 3, 1, seed=6, **SMALL)
  files = _files(tmp_path / "a")
  assert files == _files(tmp_path / "b")
  _, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", files, shallow=False)
  assert mismatch == [] and errors == []
  a = json.loads((tmp_path / "a/stats.json").read_text())
  c = json.loads((tmp_path / "c/stats.json").read_text())
  assert a != c


def test_layout_videos_and_annotations(tmp_path):
  out = tmp_path / "syn"
  stats = synthetic_vidor.generate(str(out), 4, 2, seed=1, **SMALL)
  files = _files(out)
  anns = [f for f in files if f.startswith("annotation/")]
  vids = [f for f in files if f.startswith("video/")]
  assert len(anns) == 6 and len(vids) == 6
  assert {f.split("/")[1] for f in anns} == {"training", "validation"}
  for f in anns:
    _, split, group, name = f.split("/")
    vid = name[:-5]
    assert len(vid) == 10 and vid.isdigit() and len(group) == 4
    a = vrd_json.read_annotation(
      out / f,
      dataset="vidor",
      categories=vrd_categories.VIDOR_OBJECT_CATEGORIES,
      predicates=vrd_categories.VIDOR_PREDICATES,
    )
    assert a.video_id == vid and a.video_path == f"{group}/{vid}.mp4"
    assert (a.width, a.height, a.fps) == (64, 48, 24.0)
    with av.open(str(out / "video" / group / f"{vid}.mp4")) as c:
      frames = [fr.to_ndarray(format="rgb24") for fr in c.decode(video=0)]
    assert len(frames) == a.frame_count
    assert frames[0].shape == (48, 64, 3)
    # Boxes stay inside the frame, as in VidOR.
    b = a.boxes[a.present]
    assert (b[:, 0] >= 0).all() and (b[:, 2] <= 63).all()
    assert (b[:, 1] >= 0).all() and (b[:, 3] <= 47).all()
  # Every relation frame has both boxes: the official GT builds without error.
  gt = vrd_json.load_groundtruth(out / "annotation/training")
  assert sum(len(v) for v in gt.values()) == stats["training"]["relation_instances"]
  for insts in gt.values():
    for inst in insts:
      n = inst["duration"][1] - inst["duration"][0]
      assert len(inst["sub_traj"]) == len(inst["obj_traj"]) == n
      assert n >= rel_lib.MIN_RUN


def test_coverage_of_categories_predicates_and_faults(tmp_path):
  out = tmp_path / "syn"
  stats = synthetic_vidor.generate(str(out), 30, 0, seed=0, min_frames=64, max_frames=96)[
    "training"
  ]
  assert len(stats["categories"]) >= 10
  assert set(stats["predicates"]) == set(rel_lib.SPATIAL + rel_lib.ACTIONS)
  assert stats["frame_count_gt_trajectories"] >= 1
  trackers = collections.Counter()
  mid_start = mid_stop = enters = leaves = 0
  for path in sorted((out / "annotation/training").glob("*/*.json")):
    raw = json.loads(path.read_text())
    a = vrd_json.parse_annotation(raw, str(path))
    trackers.update(r["tracker"] for fr in raw["trajectories"] for r in fr if r["generated"])
    mid_start += int((a.begin_fid > 0).sum())
    mid_stop += int((a.end_fid < a.num_annotated_frames).sum())
    first = a.present.argmax(0)
    last = a.num_annotated_frames - 1 - a.present[::-1].argmax(0)
    enters += int((first > 0).sum())
    leaves += int((last < a.num_annotated_frames - 1).sum())
  assert set(trackers) == {"linear", "kcf", "mosse"}
  assert min(mid_start, mid_stop, enters, leaves) > 10


def _scene(f=40):
  return scene_lib.Scene(128, 96, f)


def _masks(scene):
  boxes, present = [], []
  bg = np.zeros((96, 128, 3), np.float32)
  for t in range(scene.num_frames):
    _, b, _ = scene_lib.render(scene, bg, t)
    boxes.append(b)
    present.append(b[:, 0] >= 0)
  boxes, present = np.stack(boxes).astype(float), np.stack(present)
  return rel_lib.frame_masks(scene, boxes, present), boxes, present


def test_rules_above_beneath_and_towards_away():
  rng = np.random.default_rng(0)
  sc = _scene()
  dog = sc.add(rng, "dog", 64, 70, depth=4)
  # A bird hovers 5 px above the dog for frames < 20, then flies right.
  bird = sc.add(rng, "bird", 64, 50, depth=1)
  sc.tracks[bird].cx[:] = scene_lib.path(40, [(0, 64), (20, 64), (39, 124)])
  sc.tracks[bird].cy[:] = 70 - sc.tracks[dog].h / 2 - 5 - sc.tracks[bird].h / 2
  # A child walks from the left towards the dog, then back.
  child = sc.add(rng, "child", 0, 65, depth=3)
  sc.tracks[child].cx[:] = scene_lib.path(40, [(0, 10), (20, 35), (39, 5)])
  masks, _, present = _masks(sc)
  inst = rel_lib.relation_instances(masks, present)
  got = {(s, p, o): (b, e) for s, p, o, b, e in inst}
  above = got[(bird, "above", dog)]
  assert got[(dog, "beneath", bird)] == above
  assert above[0] == 0 and 20 <= above[1] <= 30
  b, e = got[(child, "towards", dog)]
  assert b <= 2 and 15 <= e <= 21
  b, e = got[(child, "away", dog)]
  assert 18 <= b <= 24 and e >= 36
  # Static objects never move "towards" anything.
  assert not any(s == dog and p in ("towards", "away") for s, p, _ in got)


def test_rules_occlusion_is_real_and_labelled():
  rng = np.random.default_rng(0)
  sc = _scene()
  car = sc.add(rng, "car", 64, 70, depth=4)
  adult = sc.add(rng, "adult", 0, 66, depth=2)
  sc.tracks[adult].cx[:] = scene_lib.path(40, [(0, 10), (39, 118)])
  masks, boxes, present = _masks(sc)
  inst = rel_lib.relation_instances(masks, present)
  got = {(s, p, o): (b, e) for s, p, o, b, e in inst}
  b, e = got[(adult, "in_front_of", car)]
  assert got[(car, "behind", adult)] == (b, e)
  # Mid-overlap the car loses pixels to the adult, who stays fully visible.
  t = (b + e) // 2
  _, _, visible = scene_lib.render(sc, np.zeros((96, 128, 3), np.float32), t)
  assert visible[car] < 0.9 and visible[adult] == 1.0
  # Outside the overlap the two are next to each other, not in front.
  assert not masks[("in_front_of", adult, car)][0]


def test_runs_and_gap_closing():
  m = np.array([0, 1, 1, 0, 0, 1, 0, 0, 0, 1], bool)
  np.testing.assert_array_equal(rel_lib.close_gaps(m, 2), [0, 1, 1, 1, 1, 1, 0, 0, 0, 1])
  assert rel_lib._runs(m) == [(1, 3), (5, 6), (9, 10)]  # pylint: disable=protected-access


def test_appearance_distinct_and_vidor_names():
  looks = [(s, c, t) for s, c, t, _ in scene_lib.APPEARANCE.values()]
  assert len(set(looks)) == len(looks) >= 10
  colours = [c for _, c, _, _ in scene_lib.APPEARANCE.values()]
  assert len(set(colours)) == len(colours)
  assert set(scene_lib.APPEARANCE) <= set(vrd_categories.VIDOR_OBJECT_CATEGORIES)
  assert set(rel_lib.SPATIAL) == set(vrd_categories.VIDOR_SPATIAL_PREDICATES)
  assert set(rel_lib.ACTIONS) <= set(vrd_categories.VIDOR_ACTION_PREDICATES)


def test_cli_stats_and_refuses_to_overwrite(tmp_path, capsys):
  out = str(tmp_path / "syn")
  args = [
    "--out",
    out,
    "--num_train",
    "2",
    "--num_val",
    "1",
    "--width",
    "64",
    "--height",
    "48",
    "--min_frames",
    "24",
    "--max_frames",
    "24",
  ]
  assert synthetic_vidor.main(args + ["--stats"]) == 0
  text = capsys.readouterr().out
  assert text.startswith("training: 2 videos, 48 frames")
  assert "validation: 1 videos, 24 frames" in text
  assert "  predicates: " in text
  with pytest.raises(FileExistsError, match="exists and is not empty"):
    synthetic_vidor.main(args)
  assert synthetic_vidor.main(args + ["--overwrite"]) == 0
  with pytest.raises(ValueError, match="must be even"):
    synthetic_vidor.generate(str(tmp_path / "odd"), 1, 0, width=63)
