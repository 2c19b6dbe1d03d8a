"""Training input at real size: examples/s per core of every paper config's input pipeline.

  python bench/input_pipeline.py [--workdir DIR] [--seconds 20] [--keep]

Builds real-size synthetic data through the real builders (occlusion: RealOOB layout, 768x1024
JPEG images with depth; video_relations: VidOR layout, 640x360 videos at 30 fps, 30-37 s each,
builder `fps4_short224`; commonsense: the VisualCOMET layout, 640x640 images, two events and
~20 inferences per image, textured so that the JPEGs weigh what VCR's do) and times each paper
config's training input (`task.make_train_source` + `task.preprocess_train`):

- 1 worker: examples in this process, one at a time. Rates are per CPU second of this process
  (`time.process_time`), i.e. what one core sustains, so that they hold on a loaded machine; the
  stages are read (random access + parse of the stored record) and preprocess (decode, augment,
  targets).
- 1 vs 2 workers: `TrainStream` with grain worker processes (`num_workers=1` and `2`), wall
  clock, after a warm-up batch; the ratio is the speed-up of the second worker. Also the CPU
  each batch took in the workers and in the main process (/proc), and from it the speed-up two
  workers reach when both cores are free ("CPU bound": one worker's CPU per batch over half
  of the workers' + main process's CPU per batch with two): on a machine shared with other
  work the wall-clock ratio shows the other work too.
- bytes per example on disk (the split's files / its examples; commonsense also: the split's
  bytes over its unique images' JPEG bytes, and over the features once per image).
- the rate one accelerator needs, from our cost estimates: occlusion 8 crops per ~26 ms step on a
  TPU v4 chip / ~7.2 ms on an H100 (README, bench/occlusion_cost.py); video_relations 128 clips per
  ~40 ms step on a v4-32 (4 hosts) / ~22 ms on 8x H100 (README, bench/video_relations_cost.py);
  commonsense ~1,000 examples/s per v4 chip (issue #12).

Prints `uptime` before and after (the machine may be shared) and how much more CPU two busy
processes get than one (on a saturated machine the 2-worker speed-up cannot exceed it), a table,
and as its last line:
`input pipeline: occlusion X ex/s/core, video_relations Y clips/s/core, commonsense Z ex/s/core,
2 workers R x, commonsense disk D x unique` (commonsense = the `*_features` paper config; R the
smallest 2-vs-1-worker ratio over the three tasks).
"""

from __future__ import annotations

import argparse
import functools
import glob
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from relations.train import config_util  # pylint: disable=g-import-not-at-top
from relations.train import input_pipeline  # pylint: disable=g-import-not-at-top
from relations.train import shm_transport  # pylint: disable=g-import-not-at-top

NEED = {
  "occlusion": "310/s per TPU v4 chip, 1,100/s per H100",
  "video_relations": "800/s per v4-32 host, 5,800/s per 8xH100 host",
  "commonsense": "1,000/s per v4 chip",
}


def _uptime(tag):
  out = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
  print(f"uptime {tag}: {out}", flush=True)
  return out


def _dir_bytes(pattern):
  return sum(os.path.getsize(p) for p in glob.glob(pattern))


# ---------------------------------------------------------------- data
def occlusion_data(root, num_train):
  """RealOOB layout, 768x1024, images re-encoded as JPEG (q95)."""
  import cv2  # pylint: disable=g-import-not-at-top
  from relations.occlusion.data import synthetic as so  # pylint: disable=g-import-not-at-top

  raw = os.path.join(root, "occlusion_raw")
  if not os.path.isdir(raw):
    so.write_dataset(raw, num_train, 1, 0, 0, (768, 1024))
    for png in glob.glob(os.path.join(raw, "images", "*.png")):
      img = cv2.imread(png, cv2.IMREAD_COLOR)
      cv2.imwrite(png[:-4] + ".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, 95])
      os.remove(png)
  config = config_util.load_config(
    "configs/occlusion.py",
    [f"data.data_dir={os.path.join(root, 'tfds')}", f"data.manual_dir={raw}"],
  )
  return config


def video_data(root, num_train):
  """VidOR layout, 640x360 at 30 fps, 900-1100 frames per video."""
  from relations.video_relations.data import synthetic as sv  # pylint: disable=g-import-not-at-top

  raw = os.path.join(root, "vidor_raw")
  if not os.path.isdir(raw):
    sv.generate(
      raw, num_train, 1, seed=0, width=640, height=360, min_frames=900, max_frames=1100, fps=30
    )
  return config_util.load_config(
    "configs/video_relations.py:paper",
    [f"data.data_dir={os.path.join(root, 'tfds')}", f"data.manual_dir={raw}"],
  )


def commonsense_data(root, num_images):
  """VisualCOMET layout, 640x640 images with VCR-like JPEG sizes, ~20 inferences per image."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  from relations.commonsense.data import synthetic as sc  # pylint: disable=g-import-not-at-top

  raw = os.path.join(root, "visualcomet_raw")
  if not os.path.isdir(raw):
    sc.generate(
      raw,
      seed=0,
      train_images=num_images,
      val_images=2,
      test_images=2,
      image_size=640,
      verbose=False,
    )
    # The drawings are flat colour (~20 KB as JPEG); VCR's movie frames weigh ~150 KB (7 GB /
    # 47k images). Texture them so that the disk ratio is measured against realistic images.
    rng = np.random.default_rng(0)
    for path in glob.glob(os.path.join(raw, "vcr1images", "*", "*.jpg")):
      img = np.asarray(Image.open(path), np.float32)
      noise = rng.normal(0, 7, img.shape[:2] + (1,)).astype(np.float32)  # ~150 KB
      Image.fromarray(np.clip(img + noise, 0, 255).astype(np.uint8)).save(path, quality=92)
  return raw


def commonsense_config(root, raw, visual):
  return config_util.load_config(
    f"configs/commonsense.py:small,visual={visual}",
    [
      f"data.data_dir={os.path.join(root, 'tfds')}",
      f"data.manual_dir={raw}",
      f"data.tokenizer_dir={os.path.join(raw, 'tokenizer')}",
    ],
  )


# ---------------------------------------------------------------- timing
def time_one_worker(task, config, seconds, min_examples=20):
  """(examples / CPU second, ms read, ms preprocess, examples) over this process, its allocator
  set up as the pipeline's preprocessing processes have it (`shm_transport.tune_allocator`)."""
  shm_transport.tune_allocator()
  source = task.make_train_source(config)
  n = len(source)
  rng = np.random.default_rng(0)
  task.preprocess_train(source[0], np.random.default_rng(0), config)  # warm caches / imports
  read = pre = 0.0
  count = 0
  t_end = time.perf_counter() + seconds
  while count < min_examples or time.perf_counter() < t_end:
    idx = int(rng.integers(n))
    c0 = time.process_time()
    ex = source[idx]
    c1 = time.process_time()
    task.preprocess_train(ex, np.random.default_rng([0, count]), config)
    c2 = time.process_time()
    read += c1 - c0
    pre += c2 - c1
    count += 1
  return count / (read + pre), 1e3 * read / count, 1e3 * pre / count, count


def _children_cpu():
  """{pid: CPU seconds} of this process's children (the grain workers), from /proc."""
  out, me, tick = {}, str(os.getpid()), os.sysconf("SC_CLK_TCK")
  for stat in glob.glob("/proc/[0-9]*/stat"):
    try:
      with open(stat) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
      continue
    if fields[1] == me:  # ppid
      out[stat.split("/")[2]] = (int(fields[11]) + int(fields[12])) / tick
  return out


def time_workers(task, config, workers, batches, batch_size):
  """(examples/s wall clock, main-process CPU ms per batch, workers' CPU ms per batch) of
  TrainStream with `workers` grain processes, after one batch."""
  source = task.make_train_source(config)
  stream = input_pipeline.TrainStream(
    source,
    functools.partial(task.preprocess_train, config=config),
    batch_size,
    0,
    0,
    1,
    num_threads=1,
    num_workers=workers,
  )
  it = stream.iterate(0, batches + 1, prefetch=2)
  next(it)  # workers started, first batch done
  k0, c0, t0 = _children_cpu(), time.process_time(), time.perf_counter()
  for i, _ in enumerate(it):
    if i == batches - 1:  # before the workers stop
      t1, c1, k1 = time.perf_counter(), time.process_time(), _children_cpu()
  work = sum(v - k0.get(p, 0.0) for p, v in k1.items())
  return batches * batch_size / (t1 - t0), 1e3 * (c1 - c0) / batches, 1e3 * work / batches


def video_padding(task, config, clips=200):
  """Fraction of padded (`frame_valid` False) frames over `clips` random training clips."""
  source = task.make_train_source(config)
  rng = np.random.default_rng(1)
  valid = [
    task.preprocess_train(
      source[int(rng.integers(len(source)))], np.random.default_rng([1, i]), config
    )["frame_valid"]
    for i in range(clips)
  ]
  return 1.0 - float(np.mean(valid))


def _burn(seconds, queue):
  t0, c0 = time.perf_counter(), time.process_time()
  while time.perf_counter() - t0 < seconds:
    pass
  queue.put(time.process_time() - c0)


def cpu_ceiling(seconds=4.0):
  """CPU seconds two busy processes get over one in the same wall time: the most any
  2-worker speed-up can show on this machine right now (1.0 when it is saturated)."""
  import multiprocessing  # pylint: disable=g-import-not-at-top

  ctx = multiprocessing.get_context("spawn")
  got = []
  for n in (1, 2):
    q = ctx.Queue()
    procs = [ctx.Process(target=_burn, args=(seconds, q)) for _ in range(n)]
    for p in procs:
      p.start()
    for p in procs:
      p.join()
    got.append(sum(q.get() for _ in range(n)))
  return got[1] / got[0]


def _split_examples(builder, split):
  return builder.info.splits[split].num_examples


def _split_bytes(builder, split):
  return _dir_bytes(os.path.join(builder.data_dir, f"*-{split}.array_record*"))


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--workdir", default="")
  ap.add_argument("--seconds", type=float, default=20.0, help="per 1-worker measurement")
  ap.add_argument("--batches", type=int, default=6, help="at least, per worker-count run")
  ap.add_argument(
    "--seconds_workers",
    type=float,
    default=6.0,
    help="one worker's CPU seconds of batches per worker-count run",
  )
  ap.add_argument("--occlusion_images", type=int, default=6)
  ap.add_argument("--videos", type=int, default=3)
  ap.add_argument("--commonsense_images", type=int, default=60)
  ap.add_argument("--keep", action="store_true", help="keep the workdir")
  args = ap.parse_args(argv)
  os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  root = args.workdir or tempfile.mkdtemp(prefix="bench_input_")
  os.makedirs(root, exist_ok=True)
  _uptime("before")

  from relations.commonsense import task as commonsense  # pylint: disable=g-import-not-at-top
  from relations.occlusion import task as occlusion  # pylint: disable=g-import-not-at-top
  from relations.video_relations import task as video_relations  # pylint: disable=g-import-not-at-top

  t = time.perf_counter()
  configs = {
    "occlusion": (occlusion, occlusion_data(root, args.occlusion_images)),
    "video_relations": (video_relations, video_data(root, args.videos)),
  }
  raw_vc = commonsense_data(root, args.commonsense_images)
  configs["commonsense"] = (commonsense, commonsense_config(root, raw_vc, "features"))
  configs["commonsense visual=vit"] = (commonsense, commonsense_config(root, raw_vc, "vit"))
  for _, (task, config) in configs.items():
    task.make_train_source(config)  # builds the TFDS datasets
  print(f"data built in {time.perf_counter() - t:.0f} s under {root}", flush=True)

  ceiling = cpu_ceiling()
  print(
    f"CPU two busy processes get over one, now: {ceiling:.2f}x (the ceiling of any "
    "2-worker speed-up measured below)",
    flush=True,
  )
  rows, ratios = {}, {}
  for name, (task, config) in configs.items():
    rate, ms_read, ms_pre, count = time_one_worker(task, config, args.seconds)
    bs = {"occlusion": 8, "video_relations": 16}.get(name, 64)
    # Enough batches for ~`seconds_workers` of one worker's work.
    batches = max(args.batches, int(rate * args.seconds_workers / bs))
    w1, main1, work1 = time_workers(task, config, 1, batches, bs)
    w2, main2, work2 = time_workers(task, config, 2, batches, bs)
    ratios[name] = w2 / w1
    # What 2 workers could reach on 2 free cores, from the CPU each batch took: one worker's
    # batch time over half the CPU (workers + main process) per batch with two.
    bound = min(2.0, work1 / ((work2 + main2) / 2))
    rows[name] = dict(
      rate=rate,
      ms_read=ms_read,
      ms_pre=ms_pre,
      count=count,
      w1=w1,
      w2=w2,
      bs=bs,
      main=main2,
      work=work2,
      bound=bound,
    )
    print(
      f"{name}: {rate:.1f} ex/s/core ({count} examples), 1 worker {w1:.1f}/s, 2 workers "
      f"{w2:.1f}/s; CPU per batch of {bs}: workers {work1:.1f} ms (1) / {work2:.1f} ms (2), "
      f"main process {main1:.2f} / {main2:.2f} ms; 2-worker bound on 2 free cores {bound:.2f}x",
      flush=True,
    )

  pad = video_padding(video_relations, configs["video_relations"][1])
  print(
    f"video_relations paper config on 30 fps videos: {100 * pad:.1f}% of clip frames are padding",
    flush=True,
  )

  # Bytes on disk.
  occ_b = occlusion.make_builder(configs["occlusion"][1])
  vid_b = video_relations.make_builder(configs["video_relations"][1])
  disk = {
    "occlusion": _split_bytes(occ_b, "train") / _split_examples(occ_b, "train"),
    "video_relations": _split_bytes(vid_b, "train") / _split_examples(vid_b, "train"),
  }
  from relations.commonsense.data.visualcomet import records  # pylint: disable=g-import-not-at-top

  recs = records.load_annotations(os.path.join(raw_vc, "train_annots.json"))
  images = records.unique_images(recs)
  jpeg_bytes = sum(os.path.getsize(os.path.join(raw_vc, "vcr1images", fn)) for _, fn, _ in images)
  feat_bytes = 0
  for _, fn, meta_fn in images:
    meta = records.load_metadata(os.path.join(raw_vc, "vcr1images", meta_fn))
    feat_bytes += (1 + len(meta["names"])) * records.FEATURE_DIM * 4
  ratio_disk = {}
  for name, denom in (("commonsense visual=vit", jpeg_bytes), ("commonsense", feat_bytes)):
    cfg = configs[name][1]
    ex_b, tab_b = commonsense._builders(cfg, "training")  # pylint: disable=protected-access
    total = _split_bytes(ex_b, "train") + _split_bytes(tab_b, "train")
    disk[name] = total / _split_examples(ex_b, "train")
    ratio_disk[name] = total / denom
  inferences = _split_examples(
    configs["commonsense"][0].make_builder(configs["commonsense"][1], "training"), "train"
  )
  print(
    f"commonsense corpus: {len(images)} train images, {inferences} inferences "
    f"({inferences / len(images):.1f} per image), mean JPEG {jpeg_bytes / len(images) / 1e3:.0f} KB"
  )

  print()
  print(
    "| task (paper config) | ex/s/core (1 worker) | ms read | ms preprocess | "
    "1 worker ex/s | 2 workers ex/s | 2w/1w | 2w/1w CPU bound | main process ms/batch | "
    "bytes/example on disk | one accelerator needs |"
  )
  print("|---|---|---|---|---|---|---|---|---|---|---|")
  for name, r in rows.items():
    need = NEED.get(name.split()[0], "")
    extra = f" ({ratio_disk[name]:.2f}x unique)" if name in ratio_disk else ""
    print(
      f"| {name} | {r['rate']:.1f} | {r['ms_read']:.2f} | {r['ms_pre']:.2f} | "
      f"{r['w1']:.1f} | {r['w2']:.1f} | {ratios[name]:.2f}x | {r['bound']:.2f}x | "
      f"{r['main']:.2f} (batch {r['bs']}) | {disk[name] / 1e3:.1f} KB{extra} | {need} |"
    )
  print(
    f"\n2 workers vs 1: {min(ratios.values()):.2f}x (smallest over the tasks); the machine "
    f"gave two busy processes {ceiling:.2f}x the CPU of one during this run"
  )
  _uptime("after")
  if not args.keep and not args.workdir:
    import shutil  # pylint: disable=g-import-not-at-top

    shutil.rmtree(root, ignore_errors=True)
  print(
    f"input pipeline: occlusion {rows['occlusion']['rate']:.1f} ex/s/core, "
    f"video_relations {rows['video_relations']['rate']:.1f} clips/s/core, "
    f"commonsense {rows['commonsense']['rate']:.1f} ex/s/core, "
    f"2 workers {min(ratios.values()):.2f}x, "
    f"commonsense disk {ratio_disk['commonsense visual=vit']:.2f}x unique"
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
