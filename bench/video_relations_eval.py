"""Our VRD evaluator CLI vs the official code, end to end from files.

  python bench/video_relations_eval.py --official /tmp/ref/xdshang \
      [--official-vru20 /tmp/ref/next] [--case-dir /tmp/vrd_case] \
      [--videos 832] [--official-videos 104] [--seed 0] [--no-xz]

The case (deterministic from --seed), sized like VidOR validation, is
written once to --case-dir (reused when its parameters match):
  - 832 videos of 300-1000 frames (1920x1080), 3-7 objects each moving with
    smooth random motion (integer boxes, like the annotations);
  - 20-52 GT relation instances per video (~36 on average, as VidOR val's
    30,142 / 832), triplets drawn from a few predicates per video, durations
    15-1000 frames (log-uniform, clipped to the objects' overlap);
  - 200 predictions per video with float boxes rounded to 2 decimals, as
    our model writes them (`relations.video_relations.inference.submission`): half
    are detections of a GT instance (its triplet 80% of the time, duration
    and boxes perturbed), half random pairs of the video's objects with a
    random predicate of the video (many share a GT triplet but are placed
    elsewhere in time: the expensive case for the scorer);
  - gt.json, submission.json, submission.json.xz (`xz -1`), and the first
    --official-videos videos as gt_slice.json / submission_slice.json.
Each measurement is a child process, timed from outside (wall; CPU = user
+ system of the child; peak RSS = the child's ru_maxrss, from os.wait4):
  floor     read the submission (and the GT) in 64 MiB blocks and parse
            every number in it (no structure, no validation), with a
            minimal compiled byte scan (Clinger's fast path); the time inside
            the child is printed too; in one thread and in two, each on half of
            each file (ours scans in two threads too); the faster of the two
            (time inside the child) is the floor; the same
            for decompressing the .xz;
  ours      `python -m relations.evaluate vidor --groundtruth gt.json
            --prediction submission.json[.xz] --official-lines`, as a user
            runs it (the first run may compile numba's cache; run twice);
  folder    ours with the GT as the official annotation folder instead of
            gt.json (written once from gt.json: annotations/validation/
            <group>/<video>.json, objects annotated from their first to
            their last frame);
  official  json.load of the slice files + the official `evaluate()`
            (xdshang, and NExTplusplus with --official-vru20) on the first
            --official-videos videos, scaled by videos / official-videos
            (the official code on all 832 videos needs ~20 GB);
  check     our CLI on the slice files: its six lines must equal the
            official ones; the script exits non-zero otherwise.
The in-memory comparison (dicts / arrays, no files) runs with
--in-memory-videos N (N videos only; never all 832: the dicts need ~20 GB).
"""

import argparse
import concurrent.futures
import json
import math
import multiprocessing
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import video_relations_official as vrd_official  # pylint: disable=g-import-not-at-top
from relations.video_relations.data import categories as vrd_categories
from relations.video_relations.metrics import columns
from relations.video_relations.metrics import scoring
from relations.video_relations.inference import association
from relations.video_relations.inference import submission

WIDTH, HEIGHT = 1920, 1080
CATEGORIES = (
  "adult",
  "child",
  "baby",
  "dog",
  "cat",
  "ball/sports_ball",
  "car",
  "bicycle",
  "chair",
  "table",
  "toy",
  "horse",
)
PREDICATES = vrd_categories.VIDOR_PREDICATES


def _track(rng, length):
  """Per-frame integer boxes of one object moving smoothly over the video."""
  w = rng.randint(40, 600)
  h = rng.randint(40, 600)
  x = rng.uniform(0, WIDTH - w)
  y = rng.uniform(0, HEIGHT - h)
  vx, vy = rng.uniform(-3, 3), rng.uniform(-3, 3)
  boxes = []
  for _ in range(length):
    vx = max(-6.0, min(6.0, vx + rng.gauss(0, 0.3)))
    vy = max(-6.0, min(6.0, vy + rng.gauss(0, 0.3)))
    x = min(max(0.0, x + vx), WIDTH - w)
    y = min(max(0.0, y + vy), HEIGHT - h)
    boxes.append([int(x), int(y), int(x) + w, int(y) + h])
  return boxes


def _noisy(rng, boxes, sigma):
  """Float copy of a track, as a detector/tracker would report it."""
  dx, dy = rng.gauss(0, sigma), rng.gauss(0, sigma)
  return [
    [
      b[0] + dx + rng.gauss(0, 2),
      b[1] + dy + rng.gauss(0, 2),
      b[2] + dx + rng.gauss(0, 2),
      b[3] + dy + rng.gauss(0, 2),
    ]
    for b in boxes
  ]


def _span(rng, lo, hi):
  """A duration inside [lo, hi): log-uniform length in [15, 1000]."""
  avail = hi - lo
  n = int(math.exp(rng.uniform(math.log(15), math.log(1000))))
  n = max(1, min(n, avail))
  s = rng.randint(lo, hi - n)
  return s, s + n


def iter_case(num_videos=832, preds_per_video=200, seed=0):
  """Yields (video_id, gt, pred, arrays) video by video (see `build_case`)."""
  rng = random.Random(seed)
  for v in range(num_videos):
    vid = str(2400000000 + v * 7919)
    length = rng.randint(300, 1000)
    nobj = rng.randint(3, 7)
    cats = [rng.choice(CATEGORIES) for _ in range(nobj)]
    tracks = [_track(rng, length) for _ in range(nobj)]
    noisy = [_noisy(rng, t, 6.0) for t in tracks]
    noisy_arr = [np.asarray(t, np.float64) for t in noisy]
    video_preds = rng.sample(PREDICATES[:12], 4) + rng.sample(PREDICATES, 2)
    rels = []
    for _ in range(rng.randint(20, 52)):
      a, b = rng.sample(range(nobj), 2)
      s, e = _span(rng, 0, length)
      rels.append(
        {
          "triplet": (cats[a], rng.choice(video_preds), cats[b]),
          "subject_tid": a,
          "object_tid": b,
          "duration": (s, e),
          "sub_traj": tracks[a][s:e],
          "obj_traj": tracks[b][s:e],
          "_ab": (a, b),
        }
      )
    preds, rels_arr = [], []
    for k in range(preds_per_video):
      if k % 2 == 0:
        r = rng.choice(rels)
        a, b = r["_ab"]
        s, e = r["duration"]
        d = max(1, (e - s) // 10)
        s = max(0, s + rng.randint(-d, d))
        e = min(length, max(s + 1, e + rng.randint(-d, d)))
        t = r["triplet"] if rng.random() < 0.8 else (cats[a], rng.choice(video_preds), cats[b])
      else:
        a, b = rng.sample(range(nobj), 2)
        s, e = _span(rng, 0, length)
        t = (cats[a], rng.choice(video_preds), cats[b])
      score = rng.random()
      preds.append(
        {
          "triplet": list(t),
          "score": score,
          "duration": [s, e],
          "sub_traj": noisy[a][s:e],
          "obj_traj": noisy[b][s:e],
        }
      )
      rels_arr.append(
        association.Relation(tuple(t), s, e, noisy_arr[a][s:e], noisy_arr[b][s:e], [score])
      )
    for r in rels:
      del r["_ab"]
    yield vid, rels, preds, rels_arr


def build_case(num_videos=832, preds_per_video=200, seed=0):
  """Returns (groundtruth, prediction, arrays).

  groundtruth and prediction are dicts in the official formats; arrays holds
  the same predictions as a model does, `{video_id: [association.Relation]}`
  with float64 box arrays (views of one array per object track, equal to the
  lists).
  """
  gt, pred, arrays = {}, {}, {}
  for vid, g, p, a in iter_case(num_videos, preds_per_video, seed):
    gt[vid], pred[vid], arrays[vid] = g, p, a
  return gt, pred, arrays


def _clock():
  return time.perf_counter(), time.process_time()


def _since(t):
  return time.perf_counter() - t[0], time.process_time() - t[1]


def in_memory(gt, pred, arrays, runs):
  """Times official vs our dict path and array path on in-memory input."""
  t = _clock()
  gt_table = columns.RelationTable.from_dicts(gt)
  t_gt = _since(t)
  print(f"GT table (once per run): wall {t_gt[0]:.2f} s, CPU {t_gt[1]:.2f} s")
  ok = True
  for protocol, checkout in runs:
    mod = vrd_official.load(checkout, protocol)
    t = _clock()
    cold = scoring.evaluate(gt, pred, protocol)
    t_cold = _since(t)
    t = _clock()
    ours = scoring.evaluate(gt, pred, protocol)
    t_warm = _since(t)
    t = _clock()
    table = columns.RelationTable.from_relations(arrays)
    t_build = _since(t)
    t = _clock()
    tab = scoring.evaluate_tables(gt_table, table, protocol)
    t_tab = _since(t)
    del table
    t = _clock()
    status, res = vrd_official.run(mod, gt, pred, protocol)
    t_off = _since(t)
    if status != "ok":
      print(f"{protocol}: official code raised {res}")
      ok = False
      continue
    off_lines = vrd_official.printed_lines(res)
    equal = off_lines == ours.official_lines() == cold.official_lines() == tab.official_lines()
    ok &= equal
    for i, what in enumerate(("wall", "CPU")):
      print(
        f"[{protocol}] {what:4s}: official {t_off[i]:6.2f} s | dicts "
        f"{t_cold[i]:5.2f} s cold, {t_warm[i]:5.2f} s warm -> "
        f"{t_off[i] / t_cold[i]:4.1f}x / {t_off[i] / t_warm[i]:4.1f}x | "
        f"arrays: evaluate_tables {t_tab[i]:5.3f} s -> "
        f"{t_off[i] / t_tab[i]:5.1f}x; + from_relations "
        f"{t_build[i]:5.2f} s -> {t_off[i] / (t_tab[i] + t_build[i]):4.1f}x"
      )
    print(f"[{protocol}] numbers {'EQUAL' if equal else 'DIFFERENT'}:")
    for a, b, c in zip(off_lines, ours.official_lines(), tab.official_lines()):
      print(
        f"    official {a}\n    dicts    {b}\n    arrays   {c}" if not a == b == c else f"    {a}"
      )
  return ok


_FLOOR = r"""
import sys, time, lzma
import numba, numpy as np

P10 = np.array([10.0 ** k for k in range(23)])

@numba.njit(nogil=True, inline="always")
def number_at(buf, i, n):
  # The number at i (buf[i] a digit or '-'), Clinger's fast path: (value, end,
  # slow); end -1 when buf ends inside it.
  neg = buf[i] == 45
  if neg:
    i += 1
  m = 0; sig = 0; e10 = 0
  while i < n and 48 <= buf[i] <= 57:
    if sig < 19:
      m = m * 10 + (buf[i] - 48); sig += 1
    else:
      e10 += 1
    i += 1
  if i < n and buf[i] == 46:
    i += 1
    while i < n and 48 <= buf[i] <= 57:
      if sig < 19:
        m = m * 10 + (buf[i] - 48); sig += 1; e10 -= 1
      i += 1
  if i < n and (buf[i] == 101 or buf[i] == 69):
    i += 1; eneg = False
    if i < n and (buf[i] == 43 or buf[i] == 45):
      eneg = buf[i] == 45; i += 1
    e = 0
    while i < n and 48 <= buf[i] <= 57:
      e = e * 10 + (buf[i] - 48); i += 1
    e10 += -e if eneg else e
  if i >= n:
    return 0.0, -1, 0
  slow = 0
  if sig <= 15 and -22 <= e10 <= 22:
    v = float(m)
    v = v / P10[-e10] if e10 < 0 else v * P10[e10]
  else:
    v = float(m) * 10.0 ** e10; slow = 1
  return (-v if neg else v), i, slow

@numba.njit(nogil=True)
def parse(buf, n0):
  # Every number outside strings, byte by byte; returns (count, sum, slow
  # count, index after the last complete token).
  n = len(buf); i = 0; cnt = 0; tot = 0.0; slow = 0; last = 0
  while i < n:
    c = buf[i]
    if c == 34:
      i += 1
      while i < n and buf[i] != 34:
        i += 1 + (buf[i] == 92)
      i += 1
      last = i
      continue
    if (48 <= c <= 57) or c == 45:
      v, e, sl = number_at(buf, i, n)
      if e < 0:
        return cnt, tot, slow, i
      tot += v; cnt += 1; slow += sl
      i = last = e
      continue
    i += 1
    last = i
  return cnt, tot, slow, last

def parse_stream(f, limit=None, block=64 << 20, fn=parse):
  # (numbers, bytes) of a binary stream, at most limit bytes of it, in blocks.
  buf = np.empty(2 * block, np.uint8); filled = 0; cnt = 0; nbytes = 0
  while True:
    want = block if limit is None else min(block, limit - nbytes)
    k = f.readinto(memoryview(buf)[filled:filled + want]) if want else 0
    nbytes += k; filled += k
    c, _, _, last = fn(buf[:filled], 0)
    cnt += c
    if k == 0:
      break
    buf[:filled - last] = buf[last:filled].copy(); filled -= last
  return cnt, nbytes

def floor(path, fn, block=64 << 20):
  t0 = time.perf_counter()
  xz = open(path, "rb").read(6).startswith(b"\xfd7zXZ\x00")
  with (lzma.open(path, "rb") if xz else open(path, "rb")) as f:
    cnt, nbytes = parse_stream(f, None, block, fn)
  return cnt, nbytes, time.perf_counter() - t0

def floor_range(path, lo, hi, fn, block=64 << 20):
  # floor() of the bytes [lo, hi) of a plain file, with a file object of its own.
  with open(path, "rb") as f:
    f.seek(lo)
    return parse_stream(f, hi - lo, block, fn)[0]

def floor2(path, fn, block=64 << 20):
  # Two threads, each on its half of the file (cut after the first ']' past the middle:
  # a box's end); parse() releases the GIL.
  from concurrent.futures import ThreadPoolExecutor
  import os
  t0 = time.perf_counter()
  size = os.path.getsize(path)
  with open(path, "rb") as f:
    f.seek(size // 2); head = f.read(1 << 20)
  cut = size // 2 + head.index(b"]") + 1 if b"]" in head else size
  with ThreadPoolExecutor(2) as ex:
    cnt = sum(ex.map(lambda r: floor_range(path, *r, fn, block), [(0, cut), (cut, size)]))
  return cnt, size, time.perf_counter() - t0

def decompress(path, block=64 << 20):
  t0 = time.perf_counter(); n = 0
  with lzma.open(path, "rb") as f:
    while True:
      d = f.read(block)
      if not d:
        break
      n += len(d)
  return n, time.perf_counter() - t0

mode = sys.argv[1]
fn = parse
fn(np.frombuffer(b"[1.5, 2]" + b" " * 200, np.uint8), 0)   # compile outside the timing
for path in sys.argv[2:]:
  if mode in ("parse", "parse2"):
    cnt, nbytes, dt = (floor2 if mode.endswith("2") else floor)(path, fn)
    print(f"{path}: {cnt} numbers, {nbytes} bytes, read + parse {dt:.2f} s")
  else:
    nbytes, dt = decompress(path)
    print(f"{path}: {nbytes} bytes, decompress only {dt:.2f} s")
"""

_OFFICIAL = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import video_relations_official as vrd_official
t0 = time.perf_counter()
mod = vrd_official.load(sys.argv[2], sys.argv[3])
with open(sys.argv[4]) as f:
  gt = json.load(f)
with open(sys.argv[5]) as f:
  pred = json.load(f)["results"]
t1 = time.perf_counter()
status, res = vrd_official.run(mod, gt, pred, sys.argv[3])
t2 = time.perf_counter()
print(f"json.load {t1 - t0:.2f} s, evaluate {t2 - t1:.2f} s")
print(json.dumps(vrd_official.printed_lines(res) if status == "ok" else
                 ["error " + str(res)]))
"""


def run_child(cmd):
  """Runs cmd as a child: (stdout, stderr, wall s, CPU s, RSS GiB, rc).

  Linux keeps a process's high-water RSS across exec, and Python starts a child by vfork (the
  child runs on this process's memory until its exec). So the child's ru_maxrss is at least this
  process's RSS: everything big (the case, the annotation folder) is built in a spawned process
  (`_spawned`), which keeps this one small.
  """
  with tempfile.TemporaryFile() as fo, tempfile.TemporaryFile() as fe:
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=fo, stderr=fe)
    # wait4: this child's own rusage (RUSAGE_CHILDREN would be the maximum
    # over all children so far).
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    fo.seek(0)
    fe.seek(0)
    out, err = fo.read().decode(), fe.read().decode()
  cpu = usage.ru_utime + usage.ru_stime
  return (out, err, wall, cpu, usage.ru_maxrss / 2**20, os.waitstatus_to_exitcode(status))


def _spawned(fn, *args):
  """fn(*args) in a fresh interpreter (spawn), so its memory never counts in a child's peak RSS."""
  ctx = multiprocessing.get_context("spawn")
  with concurrent.futures.ProcessPoolExecutor(1, mp_context=ctx) as pool:
    return pool.submit(fn, *args).result()


def write_case(case_dir, num_videos, preds, seed, slice_videos, xz):
  """Writes the case files (skipped when case.json matches)."""
  meta = {
    "videos": num_videos,
    "preds": preds,
    "seed": seed,
    "slice": slice_videos,
    "digits": 2,
    "xz": bool(xz),
  }
  meta_path = os.path.join(case_dir, "case.json")
  if os.path.exists(meta_path):
    with open(meta_path) as f:
      if json.load(f) == meta:
        return
  os.makedirs(case_dir, exist_ok=True)
  # The annotation folder is derived from gt.json: a new case needs a new one.
  shutil.rmtree(os.path.join(case_dir, "annotations"), ignore_errors=True)
  t0 = time.perf_counter()
  names = ("gt.json", "submission.json", "gt_slice.json", "submission_slice.json")
  files = [open(os.path.join(case_dir, n), "w") for n in names]
  g, s, gs, ss = files
  for f in (s, ss):
    f.write('{"version": "VERSION 1.0", "results": {')
  for f in (g, gs):
    f.write("{")
  for k, (vid, rels, _, arrays) in enumerate(iter_case(num_videos, preds, seed)):
    sep = ", " if k else ""
    gt_text = f"{sep}{json.dumps(vid)}: {json.dumps(rels)}"
    sub_text = f"{sep}{json.dumps(vid)}: " + json.dumps(
      [submission.relation_to_json(r, ndigits=2) for r in arrays]
    )
    g.write(gt_text)
    s.write(sub_text)
    if k < slice_videos:
      gs.write(gt_text)
      ss.write(sub_text)
  for f in (s, ss):
    f.write("}}")
  for f in (g, gs):
    f.write("}")
  for f in files:
    f.close()
  if xz:
    with open(os.path.join(case_dir, "submission.json.xz"), "wb") as f:
      subprocess.run(
        ["xz", "-1", "-T2", "-c", os.path.join(case_dir, "submission.json")], stdout=f, check=True
      )
  with open(meta_path, "w") as f:
    json.dump(meta, f)
  print(f"case written to {case_dir} in {time.perf_counter() - t0:.0f} s")


def annotation_folder(case_dir):
  """The case's GT as the official VidOR layout, `<case>/annotations/validation/<group>/<id>.json`.

  Written once from gt.json: each object's boxes are those of the relations it is in, held
  constant over the gaps between them (an object is annotated from its first to its last frame,
  as in the release), and the relation instances with their [begin_fid, end_fid).
  Returns the split folder, as a user passes it to `--groundtruth`.
  """
  split = os.path.join(case_dir, "annotations", "validation")
  if os.path.isdir(split):
    return split
  tmp = split + ".tmp"
  with open(os.path.join(case_dir, "gt.json")) as f:
    gt = json.load(f)
  for k, (vid, insts) in enumerate(gt.items()):
    tracks, cats, rels = {}, {}, []
    for inst in insts:
      s, p, o = inst["triplet"]
      b, e = inst["duration"]
      cats.setdefault(inst["subject_tid"], s)
      cats.setdefault(inst["object_tid"], o)
      for tid, traj in (
        (inst["subject_tid"], inst["sub_traj"]),
        (inst["object_tid"], inst["obj_traj"]),
      ):
        tracks.setdefault(tid, {}).update(zip(range(b, e), traj))
      rels.append(
        {
          "subject_tid": inst["subject_tid"],
          "object_tid": inst["object_tid"],
          "predicate": p,
          "begin_fid": b,
          "end_fid": e,
        }
      )
    frames = max(f for t in tracks.values() for f in t) + 1
    trajectories = [[] for _ in range(frames)]
    for tid in sorted(tracks):
      box = None
      for f in range(min(tracks[tid]), max(tracks[tid]) + 1):
        box = tracks[tid].get(f, box)
        trajectories[f].append(
          {
            "tid": tid,
            "bbox": dict(zip(("xmin", "ymin", "xmax", "ymax"), box)),
            "generated": int(f not in tracks[tid]),
            "tracker": "none" if f in tracks[tid] else "linear",
          }
        )
    group = os.path.join(tmp, f"{k // 100:04d}")
    os.makedirs(group, exist_ok=True)
    with open(os.path.join(group, f"{vid}.json"), "w") as f:
      json.dump(
        {
          "version": "VERSION 1.0",
          "video_id": vid,
          "video_hash": vid,
          "video_path": f"{k // 100:04d}/{vid}.mp4",
          "frame_count": frames,
          "fps": 29.97,
          "width": WIDTH,
          "height": HEIGHT,
          "subject/objects": [{"tid": t, "category": c} for t, c in sorted(cats.items())],
          "trajectories": trajectories,
          "relation_instances": rels,
        },
        f,
      )
  os.rename(tmp, split)
  return split


def _report(label, wall, cpu, rss, extra=""):
  print(f"{label:34s} wall {wall:7.2f} s  CPU {cpu:7.2f} s  peak RSS {rss:5.2f} GiB{extra}")


def files_end_to_end(case_dir, runs, num_videos, slice_videos, xz):
  """The file-based measurements (see the module docstring)."""
  py = sys.executable
  env_cmd = [py, "-m", "relations.evaluate", "vidor", "--official-lines"]
  path = lambda n: os.path.join(case_dir, n)
  sizes = {
    n: os.path.getsize(path(n))
    for n in os.listdir(case_dir)
    if n.endswith((".json", ".xz")) and n != "case.json"
  }
  print("files: " + ", ".join(f"{n} {b / 2**20:.0f} MiB" for n, b in sorted(sizes.items())))
  # A lower bound of every child's peak RSS below (see run_child).
  own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
  print(f"this process: peak RSS {own:.2f} GiB (every child's figure includes it)")
  ok = True
  # Floors: byte by byte, in one thread and in two (ours scans in two); the floor is the
  # faster inside its child (without the child's start-up and numba compile, which ours
  # also pays).
  floor = None
  for mode, label in (
    ("parse", "floor (read + parse numbers)"),
    ("parse2", "floor, 2 threads"),
  ):
    out, err, wall, cpu, rss, rc = run_child(
      [py, "-c", _FLOOR, mode, path("submission.json"), path("gt.json")]
    )
    print(out.strip() or err)
    inner = sum(
      float(l.rsplit("parse ", 1)[1].split()[0]) for l in out.splitlines() if "read + parse" in l
    )
    _report(label, wall, cpu, rss, f"  [inside the child: {inner:.2f} s]")
    if floor is None or inner < floor[3]:  # the child's own start-up and compile aside
      floor = (wall, cpu, rss, inner, label)
  print(f"floor: {floor[4]}")
  xz_floor = None
  if xz:
    out, err, wall_x, cpu_x, rss_x, rc = run_child(
      [py, "-c", _FLOOR, "xz", path("submission.json.xz")]
    )
    print(out.strip() or err)
    xz_inner = float(out.rsplit("decompress only ", 1)[1].split()[0])
    _report(
      "floor .xz (decompress only)", wall_x, cpu_x, rss_x, f"  [inside the child: {xz_inner:.2f} s]"
    )
    xz_floor = (wall_x, cpu_x, rss_x, xz_inner)
  # Ours, as a user runs it.
  ours = {}
  for protocol, _ in runs:
    inputs = [("json", "submission.json")] + ([("xz", "submission.json.xz")] if xz else [])
    for kind, sub in inputs:
      for attempt in ("first", "again"):
        out, err, wall, cpu, rss, rc = run_child(
          env_cmd
          + ["--groundtruth", path("gt.json"), "--prediction", path(sub), "--protocol", protocol]
        )
        if rc != 0:
          print(err)
          ok = False
        _report(f"ours [{protocol}] {sub} ({attempt})", wall, cpu, rss)
        ours[(protocol, kind)] = (wall, cpu, rss, out)
    print(
      "\n".join(
        "    " + l
        for l in ours[(protocol, "json")][3].splitlines()
        if l.startswith(("detection", "tagging"))
      )
    )
  # Ours with the GT as the official annotation folder (one file per video).
  folder = _spawned(annotation_folder, case_dir)
  folder_bytes = sum(
    os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(folder) for n in ns
  )
  out, err, wall, cpu, rss, rc = run_child(
    env_cmd + ["--groundtruth", folder, "--prediction", path("submission.json")]
  )
  if rc != 0:
    print(err)
    ok = False
  _report(
    "ours [helper] GT annotation folder",
    wall,
    cpu,
    rss,
    f"  ({num_videos} files, {folder_bytes / 2**20:.0f} MiB)",
  )
  print("\n".join("    " + l for l in out.splitlines() if l.startswith(("detection", "tagging"))))
  # Official on the slice, and ours on the same slice.
  scale = num_videos / slice_videos
  for protocol, checkout in runs:
    out, err, wall, cpu, rss, rc = run_child(
      [
        py,
        "-c",
        _OFFICIAL,
        os.path.dirname(os.path.abspath(__file__)),
        checkout,
        protocol,
        path("gt_slice.json"),
        path("submission_slice.json"),
      ]
    )
    if rc != 0:
      print(err)
      ok = False
      continue
    off_lines = json.loads(out.strip().splitlines()[-1])
    _report(
      f"official [{protocol}] {slice_videos} videos", wall, cpu, rss, f"  ({out.splitlines()[0]})"
    )
    off = (wall * scale, cpu * scale)
    print(
      f"{'official scaled to ' + str(num_videos) + ' videos':34s} wall "
      f"{off[0]:7.2f} s  CPU {off[1]:7.2f} s"
    )
    o2, _, w2, c2, r2, rc2 = run_child(
      env_cmd
      + [
        "--groundtruth",
        path("gt_slice.json"),
        "--prediction",
        path("submission_slice.json"),
        "--protocol",
        protocol,
      ]
    )
    ours_lines = [l for l in o2.splitlines() if l.startswith(("detection", "tagging"))]
    equal = rc2 == 0 and ours_lines == off_lines
    ok &= equal
    _report(
      f"ours [{protocol}] {slice_videos} videos",
      w2,
      c2,
      r2,
      f"  lines {'EQUAL' if equal else 'DIFFERENT'} to the official",
    )
    if not equal:
      print("\n".join(f"    official {a}\n    ours     {b}" for a, b in zip(off_lines, ours_lines)))
    w, c, r, _ = ours[(protocol, "json")]
    print(
      f"[{protocol}] ours vs official (scaled): wall {off[0] / w:.1f}x, "
      f"CPU {off[1] / c:.1f}x; vs the floor: wall {w / floor[0]:.2f}x "
      f"(child) / {w / floor[3]:.2f}x (floor's inner time), CPU "
      f"{c / floor[1]:.2f}x; peak RSS {r:.2f} GiB for a "
      f"{sizes['submission.json'] / 2**30:.2f} GiB submission + "
      f"{sizes['gt.json'] / 2**30:.2f} GiB GT"
    )
    # What no reader of these files can beat here: the floor's own time against the
    # official code (its inner time: the child's start-up and compile aside).
    print(
      f"[{protocol}] the floor ({floor[4]}) vs official (scaled): wall "
      f"{off[0] / floor[3]:.1f}x (inner time {floor[3]:.2f} s)"
    )
    if xz_floor:
      w, c, r, _ = ours[(protocol, "xz")]
      print(
        f"[{protocol}] .json.xz: ours wall {w:.2f} s = "
        f"{w / xz_floor[0]:.2f}x the decompression alone "
        f"({xz_floor[0]:.2f} s), {w / floor[0]:.2f}x the .json floor; "
        f"ours .xz - ours .json = "
        f"{w - ours[(protocol, 'json')][0]:+.2f} s; peak RSS {r:.2f} GiB"
      )
  return ok


def _stats(gt, pred):
  n_gt = sum(map(len, gt.values()))
  n_pred = sum(map(len, pred.values()))
  boxes = sum(len(p["sub_traj"]) + len(p["obj_traj"]) for ps in pred.values() for p in ps)
  pairs = 0
  for vid, rels in gt.items():
    count = {}
    for r in rels:
      count[tuple(r["triplet"])] = count.get(tuple(r["triplet"]), 0) + 1
    pairs += sum(count.get(tuple(p["triplet"]), 0) for p in pred[vid])
  return (
    f"{len(gt)} videos, {n_gt} GT relations, {n_pred} predictions "
    f"({boxes} predicted boxes), {pairs} same-triplet "
    "(prediction, GT) pairs"
  )


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--official", required=True, help="checkout of xdshang/VidVRD-helper")
  ap.add_argument(
    "--official-vru20",
    help="checkout of NExTplusplus/VidVRD-helper (also times the vru20 protocol)",
  )
  ap.add_argument("--case-dir", default="/tmp/vrd_case")
  ap.add_argument("--videos", type=int, default=832)
  ap.add_argument("--preds", type=int, default=200)
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument(
    "--official-videos", type=int, default=104, help="videos the official code is timed on (scaled)"
  )
  ap.add_argument("--no-xz", action="store_true", help="skip the .json.xz input")
  ap.add_argument(
    "--in-memory-videos",
    type=int,
    default=0,
    help="also time dicts / arrays in memory on this many videos (0: skip)",
  )
  args = ap.parse_args(argv)
  print(f"uptime: {os.popen('uptime').read().strip()}")
  runs = [("helper", args.official)]
  if args.official_vru20:
    runs.append(("vru20", args.official_vru20))
  _spawned(
    write_case,
    args.case_dir,
    args.videos,
    args.preds,
    args.seed,
    args.official_videos,
    not args.no_xz,
  )
  ok = files_end_to_end(args.case_dir, runs, args.videos, args.official_videos, not args.no_xz)
  if args.in_memory_videos:
    gt, pred, arrays = build_case(args.in_memory_videos, args.preds, args.seed)
    print(f"in memory: {_stats(gt, pred)}")
    ok &= in_memory(gt, pred, arrays, runs)
  print(f"uptime: {os.popen('uptime').read().strip()}")
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
