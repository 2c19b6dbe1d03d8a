"""Learnable synthetic videos in the exact VidOR release layout.

  python -m relations.video_relations.data.synthetic --out DIR --num_train 64 \
      --num_val 16 [--num_test 4] [--layout vidor|vidvrd] [--seed 0] \
      [--width 128 --height 96] [--stats]

writes

  DIR/annotation/{training,validation}/<group>/<video_id>.json
  DIR/video/<group>/<video_id>.mp4          (MPEG-4 video, yuv420p, 24 fps)

`--num_test` videos are written like the VidOR test split: a video under
`video/<group>/` and no annotation (the builders import them as split `test`).
`--layout vidvrd` writes the ImageNet-VidVRD release layout instead
(`train/<id>.json` from the training videos, `test/<id>.json` from the
validation ones, `videos/<id>.mp4`, ids `ILSVRC2015_train_<8 digits>`, no
`version` / `video_hash` / `video_path` / `tracker` fields, names mapped to
VidVRD's by `VIDVRD_NAMES`); `--stats` then counts in VidOR names.

and `--stats` prints (and writes DIR/stats.json) the number of videos,
frames, objects per category and relation instances per predicate per split,
computed back from the written annotation files.

Content (deterministic from --seed; one numpy Generator per video seeded with
(seed, split, index)): 64-120 frames at 128x96 by default; 1-3 scripted
behaviours per video (`synthetic_vidor_scene.SCRIPTS`: chase, approach and
leave, lean on, pick up and hold, ride, fly over, pass in front/behind,
inside a moving container) with 13 VidOR categories, each drawn with its own
shape, colour and texture. Objects enter and leave the frame, relations start
and stop mid-video, nearer objects really occlude farther ones. Relations
(12 VidOR predicates: above, beneath, behind, in_front_of, next_to, inside,
towards, away, chase, hold, ride, lean_on) are derived from the simulated
geometry and motion (`synthetic_vidor_relations`). Boxes are the tight boxes
of the drawn shapes; a box whose object is less than 40% visible is marked
`generated: 1, tracker: "linear"` (as annotators interpolate through
occlusion), and random short stretches are marked `generated: 1` with tracker
"kcf"/"mosse" and a 1-pixel jitter. About 8% of the videos carry the known
VidOR fault `frame_count > len(trajectories)` (the last 1-3 frames are left
unannotated).

The output folder is written under a temporary name and renamed at the end.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile

import av
import numpy as np

from relations.video_relations.data import synthetic_relations as rel_lib
from relations.video_relations.data import synthetic_scene as scene_lib
from relations.video_relations.data import annotations as vrd_json

FPS = 24
SPLITS = {"training": 0, "validation": 1, "testing": 2}
# Synthetic VidOR names -> ImageNet-VidVRD names (`--layout vidvrd`); several VidOR names
# may share one VidVRD name where VidVRD has no counterpart.
VIDVRD_NAMES = {
  "adult": "person",
  "child": "monkey",
  "dog": "dog",
  "cat": "domestic_cat",
  "horse": "horse",
  "bicycle": "bicycle",
  "car": "car",
  "ball/sports_ball": "ball",
  "cup": "frisbee",
  "toy": "skateboard",
  "table": "bus",
  "sofa": "sofa",
  "bird": "bird",
  "above": "above",
  "beneath": "beneath",
  "behind": "behind",
  "in_front_of": "front",
  "next_to": "next_to",
  "inside": "sit_inside",
  "towards": "toward",
  "away": "away",
  "chase": "chase",
  "hold": "hold",
  "ride": "ride",
  "lean_on": "touch",
}
# Sampling weights of the scripts: actions that are rarer by geometry alone
# are drawn more often.
SCRIPT_WEIGHTS = {
  "chase": 1.5,
  "approach": 1.0,
  "lean": 1.5,
  "hold": 1.5,
  "ride": 1.5,
  "fly_over": 1.0,
  "occlude": 1.0,
  "inside": 1.0,
}
VISIBLE_FOR_MANUAL = 0.4


def write_mp4(frames: np.ndarray, fps: int = FPS, codec: str = "mpeg4") -> bytes:
  """Encodes [T, H, W, 3] uint8 RGB frames (even H, W) as MP4 bytes.

  Args:
    frames: the video.
    fps: frame rate written in the container.
    codec: "mpeg4" (MPEG-4 Part 2 at 1 Mbit/s, GOP 12: byte-identical from
      call to call) or "libx264" (H.264 as in the VidOR release, crf 17; its output
      varied between calls in the same process even with one thread, so the
      generator's default is mpeg4).

  Returns:
    The MP4 file content.
  """
  options = {} if codec == "mpeg4" else {"crf": "17", "preset": "veryfast", "threads": "1"}
  buf = io.BytesIO()
  with av.open(buf, mode="w", format="mp4") as container:
    stream = container.add_stream(codec, rate=fps, options=options)
    stream.width, stream.height = frames.shape[2], frames.shape[1]
    stream.pix_fmt = "yuv420p"
    if codec == "mpeg4":
      # A generous rate and a 12-frame GOP: with the encoder defaults the
      # P-frames drifted (mean error 3.3 -> 6.5 grey levels over 50 frames).
      stream.bit_rate = 1_000_000
      stream.gop_size = 12
    stream.codec_context.thread_count = 1
    for img in frames:
      frame = av.VideoFrame.from_ndarray(img, format="rgb24")
      for packet in stream.encode(frame):
        container.mux(packet)
    for packet in stream.encode():
      container.mux(packet)
  return buf.getvalue()


def make_scene(
  rng: np.random.Generator, width: int, height: int, num_frames: int
) -> scene_lib.Scene:
  """1-3 scripted behaviours in overlapping time windows."""
  scene = scene_lib.Scene(width, height, num_frames)
  names = list(SCRIPT_WEIGHTS)
  p = np.array([SCRIPT_WEIGHTS[n] for n in names])
  n_scripts = int(rng.choice([1, 2, 2, 3]))
  for name in rng.choice(names, size=n_scripts, replace=False, p=p / p.sum()):
    length = int(rng.uniform(0.6, 1.0) * num_frames)
    t0 = int(rng.integers(0, num_frames - length + 1))
    scene_lib.SCRIPTS[name](scene, rng, t0, t0 + length)
  return scene


def simulate(rng: np.random.Generator, width: int, height: int, min_frames: int, max_frames: int):
  """Renders one video and derives its annotation.

  Returns:
    (frames [F, H, W, 3] uint8, scene, boxes [F, K, 4] int64, present [F, K]
    bool, generated [F, K] bool, tracker [F, K] str, relations list of
    (s, predicate, o, begin, end), num_annotated_frames).
  """
  num_frames = int(rng.integers(min_frames, max_frames + 1))
  scene = make_scene(rng, width, height, num_frames)
  bg = scene_lib.background(rng, width, height)
  frames, boxes, visible = [], [], []
  for t in range(num_frames):
    img, b, vis = scene_lib.render(scene, bg, t)
    frames.append(img)
    boxes.append(b)
    visible.append(vis)
  boxes = np.stack(boxes)
  visible = np.stack(visible)
  # Slivers at the frame edge are not annotated (>= 3 px each way).
  present = (
    (boxes[..., 2] - boxes[..., 0] >= 2)
    & (boxes[..., 3] - boxes[..., 1] >= 2)
    & (boxes[..., 0] >= 0)
  )
  generated = present & (visible < VISIBLE_FOR_MANUAL)
  tracker = np.where(generated, "linear", "none").astype(object)
  k = boxes.shape[1]
  for j in range(k):
    frames_j = np.nonzero(present[:, j])[0]
    if len(frames_j) > 12 and rng.random() < 0.25:
      length = int(rng.integers(4, 11))
      start = int(rng.choice(frames_j[:-length]))
      seg = [f for f in range(start, start + length) if present[f, j]]
      name = str(rng.choice(["kcf", "mosse"]))
      for f in seg:
        jitter = rng.integers(-1, 2, 4)
        b = boxes[f, j] + jitter
        b[[0, 2]] = np.clip(b[[0, 2]], 0, width - 1)
        b[[1, 3]] = np.clip(b[[1, 3]], 0, height - 1)
        if b[0] <= b[2] and b[1] <= b[3]:
          boxes[f, j] = b
        generated[f, j] = True
        tracker[f, j] = name
  num_annotated = num_frames
  if rng.random() < 0.08:
    num_annotated = num_frames - int(rng.integers(1, 4))
    present[num_annotated:] = False
  masks = rel_lib.frame_masks(scene, boxes.astype(np.float64), present)
  relations = rel_lib.relation_instances(masks, present)
  return (np.stack(frames), scene, boxes, present, generated, tracker, relations, num_annotated)


def annotation_json(
  video_id: str,
  group: str,
  scene,
  boxes,
  present,
  generated,
  tracker,
  relations,
  num_annotated: int,
  width: int,
  height: int,
  fps: int = FPS,
) -> dict:
  """The VidOR annotation dict of one simulated video."""
  num_frames = boxes.shape[0]
  objects = [j for j in range(boxes.shape[1]) if present[:, j].any()]
  trajectories = []
  for f in range(num_annotated):
    frame = []
    for j in objects:
      if present[f, j]:
        x1, y1, x2, y2 = (int(v) for v in boxes[f, j])
        frame.append(
          {
            "tid": j,
            "bbox": {"xmin": x1, "ymin": y1, "xmax": x2, "ymax": y2},
            "generated": int(generated[f, j]),
            "tracker": str(tracker[f, j]),
          }
        )
    trajectories.append(frame)
  return {
    "version": vrd_json.VIDOR_VERSION,
    "video_id": video_id,
    "video_hash": hashlib.md5(video_id.encode()).hexdigest()[:30],
    "video_path": f"{group}/{video_id}.mp4",
    "frame_count": num_frames,
    "fps": float(fps),
    "width": width,
    "height": height,
    "subject/objects": [{"tid": j, "category": scene.tracks[j].category} for j in objects],
    "trajectories": trajectories,
    "relation_instances": [
      {"subject_tid": s, "object_tid": o, "predicate": p, "begin_fid": b, "end_fid": e}
      for s, p, o, b, e in relations
    ],
  }


def video_id_of(seed: int, split: str, index: int) -> str:
  """A 10-digit numeric id, unique per (seed < 400, split, index < 1e6)."""
  return str(5_000_000_000 + seed * 10_000_000 + SPLITS[split] * 1_000_000 + index)


def generate(
  out: str,
  num_train: int,
  num_val: int,
  seed: int = 0,
  width: int = 128,
  height: int = 96,
  min_frames: int = 64,
  max_frames: int = 120,
  overwrite: bool = False,
  codec: str = "mpeg4",
  fps: int = FPS,
  num_test: int = 0,
  layout: str = "vidor",
) -> dict:
  """Writes the dataset to `out` (see module docstring); returns its stats.

  `fps` is the frame rate written in the videos and annotations (24 for the
  demo; bench/input_pipeline.py uses VidOR's 30).
  """
  if width % 2 or height % 2:
    raise ValueError(f"width and height must be even (yuv420p), got {width}x{height}")
  if os.path.exists(out) and os.listdir(out) and not overwrite:
    raise FileExistsError(f"{out} exists and is not empty (use --overwrite)")
  parent = os.path.dirname(os.path.abspath(out))
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=".synthetic_vidor-", dir=parent)
  try:
    if layout not in ("vidor", "vidvrd"):
      raise ValueError(f"layout: unknown {layout!r} (vidor, vidvrd)")
    for split, count in (("training", num_train), ("validation", num_val), ("testing", num_test)):
      for i in range(count):
        rng = np.random.default_rng([seed, SPLITS[split], i])
        vid = video_id_of(seed, split, i)
        group = f"{i // 10:04d}"
        frames, scene, *anno = simulate(rng, width, height, min_frames, max_frames)
        data = annotation_json(vid, group, scene, *anno, width=width, height=height, fps=fps)
        ann_dir = os.path.join(tmp, "annotation", split, group)
        vid_dir = os.path.join(tmp, "video", group)
        os.makedirs(vid_dir, exist_ok=True)
        if split != "testing":  # the test split's annotation is never released
          os.makedirs(ann_dir, exist_ok=True)
          with open(os.path.join(ann_dir, f"{vid}.json"), "w") as fh:
            fh.write(json.dumps(data, separators=(",", ":")))
        with open(os.path.join(vid_dir, f"{vid}.mp4"), "wb") as fh:
          fh.write(write_mp4(frames, fps=fps, codec=codec))
    stats = dataset_stats(tmp)
    if layout == "vidvrd":
      _to_vidvrd_layout(tmp)
    with open(os.path.join(tmp, "stats.json"), "w") as fh:
      json.dump(stats, fh, indent=1, sort_keys=True)
    if os.path.exists(out):
      shutil.rmtree(out)
    os.replace(tmp, out)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  return stats


def vidvrd_id(vidor_id: str) -> str:
  """The ImageNet-VidVRD-style id of a synthetic video (`--layout vidvrd`)."""
  return f"ILSVRC2015_train_{int(vidor_id) % 10**8:08d}"


def _to_vidvrd_layout(root: str) -> None:
  """Rewrites a synthetic VidOR folder in place into the ImageNet-VidVRD layout (module docstring)."""
  folders = {"training": "train", "validation": "test"}
  os.makedirs(os.path.join(root, "videos"))
  for group in sorted(os.listdir(os.path.join(root, "video"))):
    for name in sorted(os.listdir(os.path.join(root, "video", group))):
      vid = name.removesuffix(".mp4")
      os.replace(
        os.path.join(root, "video", group, name),
        os.path.join(root, "videos", f"{vidvrd_id(vid)}.mp4"),
      )
  shutil.rmtree(os.path.join(root, "video"))
  for split, folder in folders.items():
    src = os.path.join(root, "annotation", split)
    if not os.path.isdir(src):
      continue
    os.makedirs(os.path.join(root, folder))
    for group in sorted(os.listdir(src)):
      for name in sorted(os.listdir(os.path.join(src, group))):
        with open(os.path.join(src, group, name)) as fh:
          data = json.load(fh)
        for key in ("version", "video_hash", "video_path"):
          data.pop(key)
        data["video_id"] = vidvrd_id(data["video_id"])
        for obj in data["subject/objects"]:
          obj["category"] = VIDVRD_NAMES[obj["category"]]
        for frame in data["trajectories"]:
          for box in frame:
            box.pop("tracker")
        for rel in data["relation_instances"]:
          rel["predicate"] = VIDVRD_NAMES[rel["predicate"]]
        with open(os.path.join(root, folder, f"{data['video_id']}.json"), "w") as fh:
          fh.write(json.dumps(data, separators=(",", ":")))
  shutil.rmtree(os.path.join(root, "annotation"))


def dataset_stats(root: str) -> dict:
  """Counts read back from the annotation files of a VidOR-layout folder.

  Returns:
    {split: {"videos", "frames", "annotated_frames", "objects",
    "generated_boxes", "boxes", "relation_instances",
    "frame_count_gt_trajectories", "categories": {name: n},
    "predicates": {name: n}}}.
  """
  out = {}
  for split in SPLITS:
    folder = os.path.join(root, "annotation", split)
    if not os.path.isdir(folder):
      continue
    s = collections.Counter()
    cats, preds = collections.Counter(), collections.Counter()
    for group in sorted(os.listdir(folder)):
      for name in sorted(os.listdir(os.path.join(folder, group))):
        a = vrd_json.read_annotation(os.path.join(folder, group, name), dataset="vidor")
        s["videos"] += 1
        s["frames"] += a.frame_count
        s["annotated_frames"] += a.num_annotated_frames
        s["frame_count_gt_trajectories"] += int(a.frame_count > a.num_annotated_frames)
        s["objects"] += len(a.categories)
        s["boxes"] += int(a.present.sum())
        s["generated_boxes"] += int(a.generated.sum())
        s["relation_instances"] += a.num_relations
        cats.update(a.categories)
        preds.update(a.predicates)
    out[split] = {
      **s,
      "categories": dict(sorted(cats.items())),
      "predicates": dict(sorted(preds.items())),
    }
  return out


def format_stats(stats: dict) -> str:
  """A short text table of `dataset_stats`."""
  lines = []
  for split, s in stats.items():
    lines.append(
      f"{split}: {s['videos']} videos, {s['frames']} frames, "
      f"{s['objects']} objects, {s['relation_instances']} relation "
      f"instances, {s['generated_boxes']}/{s['boxes']} generated "
      f"boxes, {s['frame_count_gt_trajectories']} videos with "
      "frame_count > len(trajectories)"
    )
    lines.append("  predicates: " + ", ".join(f"{k}={v}" for k, v in s["predicates"].items()))
    lines.append("  categories: " + ", ".join(f"{k}={v}" for k, v in s["categories"].items()))
  return "\n".join(lines)


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--out", required=True)
  parser.add_argument("--num_train", type=int, default=64)
  parser.add_argument("--num_val", type=int, default=16)
  parser.add_argument("--num_test", type=int, default=0, help="videos without annotation")
  parser.add_argument("--layout", choices=["vidor", "vidvrd"], default="vidor")
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--width", type=int, default=128)
  parser.add_argument("--height", type=int, default=96)
  parser.add_argument("--min_frames", type=int, default=64)
  parser.add_argument("--max_frames", type=int, default=120)
  parser.add_argument("--overwrite", action="store_true")
  parser.add_argument(
    "--stats", action="store_true", help="print the statistics of the written data"
  )
  args = parser.parse_args(argv)
  stats = generate(
    args.out,
    args.num_train,
    args.num_val,
    args.seed,
    args.width,
    args.height,
    args.min_frames,
    args.max_frames,
    args.overwrite,
    num_test=args.num_test,
    layout=args.layout,
  )
  if args.stats:
    print(format_stats(stats))
  return 0


if __name__ == "__main__":
  sys.exit(main())
