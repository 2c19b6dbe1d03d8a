"""Writes the builders' dummy_data (run once; the output is committed).

  python tests/video_relations/data/make_dummy_data.py

VidOR (`relations/video_relations/data/vidor/dummy_data`): 2 training + 1 validation
synthetic videos (64x48, 16-24 frames, real H.264 MP4s; libx264 bytes are
not reproducible, the annotations are) with two injected
data faults:
  - training video 0: `frame_count` raised by 3, so the MP4 decodes to fewer
    frames than declared and `frame_count > len(trajectories)`;
  - training video 1: the last 2 annotated frames dropped from
    `trajectories`, one relation extended past the annotation end and one
    relation starting after it (the builder clips / drops them).
ImageNet-VidVRD (`relations/video_relations/data/vidvrd/dummy_data`): 2 train + 1 test
videos converted to the VidVRD layout (no version/video_hash/video_path/
tracker, VidVRD names: person, domestic_cat, ball, toward, front, ...).
"""

import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from relations.video_relations.data import synthetic as synthetic_vidor  # noqa: E402  (after sys.path)

VIDOR_DUMMY = os.path.join(ROOT, "relations/video_relations/data/vidor/dummy_data")
VIDVRD_DUMMY = os.path.join(ROOT, "relations/video_relations/data/vidvrd/dummy_data")
# H.264 like the VidOR release videos (the generator's default is mpeg4).
SMALL = dict(width=64, height=48, min_frames=16, max_frames=24, codec="libx264")

TO_VIDVRD_CATEGORY = {
  "adult": "person",
  "child": "person",
  "cat": "domestic_cat",
  "ball/sports_ball": "ball",
  "dog": "dog",
  "horse": "horse",
  "bicycle": "bicycle",
  "bird": "bird",
  "car": "car",
  "sofa": "sofa",
}
TO_VIDVRD_PREDICATE = {
  "towards": "toward",
  "in_front_of": "front",
  "next_to": "next_to",
  "behind": "behind",
  "above": "above",
  "beneath": "beneath",
  "away": "away",
  "chase": "chase",
  "ride": "ride",
  "hold": "hold",
}


def _files(root, split):
  out = []
  for dirpath, _, names in os.walk(os.path.join(root, "annotation", split)):
    out += [os.path.join(dirpath, n) for n in names]
  return sorted(out)


def _rewrite(path, fn):
  with open(path) as fh:
    data = json.load(fh)
  fn(data)
  with open(path, "w") as fh:
    json.dump(data, fh, separators=(",", ":"))


def make_vidor():
  shutil.rmtree(VIDOR_DUMMY, ignore_errors=True)
  synthetic_vidor.generate(VIDOR_DUMMY, 2, 1, seed=11, **SMALL)
  os.remove(os.path.join(VIDOR_DUMMY, "stats.json"))
  train = _files(VIDOR_DUMMY, "training")

  def more_frames_declared(d):
    d["frame_count"] += 3

  def truncated_trajectories(d):
    n = len(d["trajectories"]) - 2
    d["trajectories"] = d["trajectories"][:n]
    rels = d["relation_instances"]
    ends_late = dict(rels[0], end_fid=d["frame_count"])
    starts_late = dict(rels[0], begin_fid=n, end_fid=d["frame_count"])
    d["relation_instances"] = [ends_late, starts_late] + rels[1:]

  _rewrite(train[0], more_frames_declared)
  _rewrite(train[1], truncated_trajectories)


def make_vidvrd():
  shutil.rmtree(VIDVRD_DUMMY, ignore_errors=True)
  tmp = tempfile.mkdtemp()
  synthetic_vidor.generate(os.path.join(tmp, "v"), 2, 1, seed=12, **SMALL)
  os.makedirs(os.path.join(VIDVRD_DUMMY, "videos"))
  for split, out_split in (("training", "train"), ("validation", "test")):
    os.makedirs(os.path.join(VIDVRD_DUMMY, out_split))
    for i, path in enumerate(_files(os.path.join(tmp, "v"), split)):
      with open(path) as fh:
        d = json.load(fh)
      vid = f"ILSVRC2015_{out_split}_{i:08d}"
      keep = {
        o["tid"]: TO_VIDVRD_CATEGORY[o["category"]]
        for o in d["subject/objects"]
        if o["category"] in TO_VIDVRD_CATEGORY
      }
      out = {
        "video_id": vid,
        "frame_count": d["frame_count"],
        "fps": d["fps"],
        "width": d["width"],
        "height": d["height"],
        "subject/objects": [{"tid": t, "category": c} for t, c in keep.items()],
        "trajectories": [
          [
            {"tid": r["tid"], "bbox": r["bbox"], "generated": r["generated"]}
            for r in frame
            if r["tid"] in keep
          ]
          for frame in d["trajectories"]
        ],
        "relation_instances": [
          dict(r, predicate=TO_VIDVRD_PREDICATE[r["predicate"]])
          for r in d["relation_instances"]
          if r["predicate"] in TO_VIDVRD_PREDICATE
          and r["subject_tid"] in keep
          and r["object_tid"] in keep
        ],
      }
      with open(os.path.join(VIDVRD_DUMMY, out_split, f"{vid}.json"), "w") as fh:
        json.dump(out, fh, separators=(",", ":"))
      src = os.path.join(tmp, "v", "video", d["video_path"])
      shutil.copy(src, os.path.join(VIDVRD_DUMMY, "videos", f"{vid}.mp4"))
  shutil.rmtree(tmp)


if __name__ == "__main__":
  make_vidor()
  make_vidvrd()
  print("wrote", VIDOR_DUMMY, VIDVRD_DUMMY)
