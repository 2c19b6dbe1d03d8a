"""Dataset preparation throughput: one process vs Apache Beam with 1 and 2 workers.

  PYTHONPATH=. python bench/prepare.py [--videos 24] [--occlusion_images 160] \
      [--visualcomet_images 400] [--datasets vidor,occlusion_boundaries,visualcomet]

Builds real-size synthetic releases with the project's builders, three ways, each in a fresh
process that times only `download_and_prepare` (Beam worker start-up included):

  plain   the in-process generator path (default install, `ensure_built`)
  inmem   Beam FnApiRunner in this process (direct_running_mode=in_memory): Beam's cost without
          moving elements between processes (not in the default --modes)
  beam1   Beam FnApiRunner (the DirectRunner's engine), multi_processing, direct_num_workers=1
  beam2   Beam FnApiRunner, multi_processing, direct_num_workers=2 (what `tfds build
          --beam_pipeline_options=runner=FnApiRunner,direct_running_mode=multi_processing,
          direct_num_workers=2` runs)

Data (made once under --workdir, then reused): VidOR-like 640x360 MPEG-4 videos of 600-660
frames at 24 fps built with config fps2_short224; RealOOB-layout 768x1024 images with depth built
with config realoob; VisualCOMET 768x768 JPEG images with ~4 events each, config training. The
synthetic generators are slow at these sizes on a loaded machine, so a few distinct videos/images
are rendered and hard-linked under more ids (the builder reads and encodes each id in full).

Prints the load average before and after, a table (items/s per mode, speedup of beam2 over plain),
the extrapolation to each real dataset's size (1 core = the plain rate) and the CPU per item of
Beam's runner process (this process: it receives every element a stage writes and sends it to
the next stage's worker) and of its workers. A Beam build whose completeness check fails
(`relations.tfds_util.BeamExamplesLostError`: Beam dropped examples) is reported and built again,
up to --attempts times. Goal: beam2 >= 1.7x plain on a 2-core machine. Each mode
also builds a release of 2 items: the difference is the rate without start-up (what the real
datasets, hours long, see). The last line is the summary:
  prepare: beam2/plain vidor=X.XXx ...; without start-up vidor=X.XXx ...
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODES = {
  "plain": None,
  "inmem": "runner=FnApiRunner,direct_running_mode=in_memory",
  "beam1": "runner=FnApiRunner,direct_running_mode=multi_processing,direct_num_workers=1",
  "beam2": "runner=FnApiRunner,direct_running_mode=multi_processing,direct_num_workers=2",
}

# name -> (builder config, item unit, {real split: items}) for the extrapolation.
REAL = {
  "vidor": (
    "fps2_short224",
    "videos",
    {"VidOR train+val (7,000 + 835 videos)": 7835, "ImageNet-VidVRD (800 + 200 videos)": 1000},
  ),
  "occlusion_boundaries": (
    "realoob",
    "images",
    {"RealOOB (520 images + 248 hard negatives)": 768, "PIOD (10,100 images)": 10100},
  ),
  "visualcomet": (
    "training",
    "examples",
    {"VisualCOMET training expansion (~1.4M inferences, 59,356 images)": 1_400_000},
  ),
}


def _cpu_seconds() -> float:
  """User + system CPU seconds of this process and its finished children (the Beam workers)."""
  me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
  return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _uptime() -> str:
  return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def _read_text(path: str) -> str:
  with open(path) as f:
    return f.read()


def _link_or_copy(src, dst):
  os.makedirs(os.path.dirname(dst), exist_ok=True)
  try:
    os.link(src, dst)
  except OSError:
    shutil.copyfile(src, dst)


def make_vidor(out: str, num: int, distinct: int, src: str | None = None) -> int:
  """`num` training videos (640x360, 600-660 frames) from `distinct` rendered ones (in `src`)."""
  from relations.video_relations.data import synthetic  # pylint: disable=g-import-not-at-top

  src = src or out + ".src"
  if not os.path.isdir(src):
    synthetic.generate(
      src,
      num_train=distinct,
      num_val=0,
      seed=0,
      width=640,
      height=360,
      min_frames=600,
      max_frames=660,
    )
  annos = sorted(
    os.path.join(d, f)
    for d, _, fs in os.walk(os.path.join(src, "annotation"))
    for f in fs
    if f.endswith(".json")
  )
  for i in range(num):
    a = annos[i % len(annos)]
    with open(a) as f:
      anno = json.load(f)
    group = os.path.basename(os.path.dirname(a))
    video = os.path.join(src, "video", group, anno["video_id"] + ".mp4")
    anno["video_id"] = f"{9000000000 + i}"
    anno.pop("video_path", None)
    dst = os.path.join(out, "annotation", "training", group, anno["video_id"] + ".json")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "w") as f:
      json.dump(anno, f)
    _link_or_copy(video, os.path.join(out, "video", group, anno["video_id"] + ".mp4"))
  return num


def make_occlusion(out: str, num: int, distinct: int, src: str | None = None) -> int:
  """RealOOB layout: `num` 768x1024 images (1/8 of them in test) from `distinct` rendered ones."""
  from relations.occlusion.data import synthetic  # pylint: disable=g-import-not-at-top

  src = src or out + ".src"
  if not os.path.isdir(src):
    synthetic.write_dataset(src, num_train=distinct, num_test=0, seed=0, size=(768, 1024))
  with open(os.path.join(src, "splits", "train.txt")) as f:
    ids = [l.strip() for l in f if l.strip()]
  new_ids = []
  for i in range(num):
    old = ids[i % len(ids)]
    new = f"img_{i:05d}"
    for sub in ("images", "boundaries", "orientation", "valid", "depth"):
      for name in os.listdir(os.path.join(src, sub)):
        stem, ext = os.path.splitext(name)
        if stem == old:
          _link_or_copy(os.path.join(src, sub, name), os.path.join(out, sub, new + ext))
    new_ids.append(new)
  n_test = max(1, num // 8)
  os.makedirs(os.path.join(out, "splits"), exist_ok=True)
  with open(os.path.join(out, "splits", "train.txt"), "w") as f:
    f.write("\n".join(new_ids[n_test:]) + "\n")
  with open(os.path.join(out, "splits", "test.txt"), "w") as f:
    f.write("\n".join(new_ids[:n_test]) + "\n")
  return num


def make_visualcomet(out: str, num: int) -> int:
  from relations.commonsense.data import synthetic  # pylint: disable=g-import-not-at-top

  synthetic.generate(
    out,
    seed=0,
    train_images=num,
    val_images=max(1, num // 8),
    test_images=1,
    image_size=768,
    features=False,
    verbose=False,
  )
  return -1  # Counted after the build (examples, not images).


TINY = 2  # items of the start-up measurement (videos, images; VisualCOMET: train images)


def _ensure_manual(args, name: str, suffix: str, size: int) -> str:
  """The synthetic release of `size` items under --workdir (made once, then reused)."""
  manual = os.path.join(args.workdir, f"{name}_manual{suffix}")
  stamp = manual + ".size"
  made = os.path.exists(stamp) and _read_text(stamp) == str(size)
  if not (os.path.isdir(manual) and made):
    shutil.rmtree(manual, ignore_errors=True)
    t0 = time.perf_counter()
    # The rendered sources are shared by every size of a dataset.
    src = os.path.join(args.workdir, f"{name}_manual.src")
    if name == "vidor":
      make_vidor(manual, size, args.distinct_videos, src=src)
    elif name == "occlusion_boundaries":
      make_occlusion(manual, size, args.distinct_occlusion_images, src=src)
    else:
      make_visualcomet(manual, size)
    with open(stamp, "w") as f:
      f.write(str(size))
    print(
      f"{name}: synthetic release of {size} written in {time.perf_counter() - t0:.0f}s", flush=True
    )
  return manual


def _build(args, env, name: str, mode: str, manual: str, lost: dict) -> dict:
  """One timed build in a fresh process; rebuilt (up to --attempts) when Beam lost examples."""
  data_dir = os.path.join(args.workdir, f"{name}_{mode}_tfds")
  cmd = [sys.executable, os.path.abspath(__file__), "--_build", name, manual, data_dir]
  cmd.append(MODES[mode] or "")
  for attempt in range(1, args.attempts + 1):
    shutil.rmtree(data_dir, ignore_errors=True)
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    shutil.rmtree(data_dir, ignore_errors=True)
    line = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
    if r.returncode or not line:
      print(r.stdout[-2000:], r.stderr[-4000:], file=sys.stderr)
      raise SystemExit(f"{name} {mode}: build failed")
    result = json.loads(line[0][7:])
    if "lost" not in result:
      return result
    # Beam's FnApiRunner dropped data; the build failed its completeness check.
    lost[(name, mode)] = lost.get((name, mode), 0) + 1
    print(
      f"{name:22s} {mode:6s} attempt {attempt} ({os.path.basename(manual)}): {result['lost']} "
      f"({result['seconds']:.1f}s; {_uptime().split('load average: ')[-1]})",
      flush=True,
    )
  raise SystemExit(f"{name} {mode}: Beam lost data in all {args.attempts} attempts")


def build_once(name: str, manual: str, data_dir: str, beam_options: str | None) -> dict:
  """Runs in a fresh process: times download_and_prepare only."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  import relations.datasets  # pylint: disable=g-import-not-at-top

  cls = relations.datasets.BUILDERS[name]
  builder = cls(config=REAL[name][0], data_dir=data_dir, file_format="array_record")
  dc = tfds.download.DownloadConfig(manual_dir=manual)
  if beam_options:
    from apache_beam.options import pipeline_options  # pylint: disable=g-import-not-at-top

    dc.beam_options = pipeline_options.PipelineOptions(
      flags=[f"--{o}" for o in beam_options.split(",")]
    )
  from relations import tfds_util  # pylint: disable=g-import-not-at-top

  cpu0 = _cpu_seconds()
  self0 = resource.getrusage(resource.RUSAGE_SELF)
  t0 = time.perf_counter()
  try:
    builder.download_and_prepare(download_config=dc)
  except tfds_util.BeamExamplesLostError as e:
    return {"lost": str(e).split(" Nothing was kept")[0], "seconds": time.perf_counter() - t0}
  seconds = time.perf_counter() - t0
  self1 = resource.getrusage(resource.RUSAGE_SELF)
  # This process: the plain build, or Beam's runner (it moves every element between stages).
  driver_cpu = (self1.ru_utime + self1.ru_stime) - (self0.ru_utime + self0.ru_stime)
  from array_record.python import array_record_module  # pylint: disable=g-import-not-at-top

  on_disk = {}
  for split, info in builder.info.splits.items():
    on_disk[split] = 0
    for path in info.filepaths:
      reader = array_record_module.ArrayRecordReader(os.fspath(path))
      on_disk[split] += reader.num_records()
      reader.close()
  return {
    "seconds": seconds,
    "cpu_seconds": _cpu_seconds() - cpu0,
    "driver_cpu_seconds": driver_cpu,
    "splits": {k: v.num_examples for k, v in builder.info.splits.items()},
    "records_on_disk": on_disk,
    "bytes": sum(v.num_bytes for v in builder.info.splits.values()),
  }


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
  p.add_argument("--workdir", default="/tmp/relations_bench_prepare")
  p.add_argument("--datasets", default="vidor,occlusion_boundaries,visualcomet")
  p.add_argument("--modes", default="plain,beam1,beam2")
  p.add_argument("--videos", type=int, default=24)
  p.add_argument("--distinct_videos", type=int, default=2)
  p.add_argument("--occlusion_images", type=int, default=160)
  p.add_argument("--distinct_occlusion_images", type=int, default=4)
  p.add_argument("--visualcomet_images", type=int, default=400)
  p.add_argument(
    "--attempts",
    type=int,
    default=3,
    help="builds per mode when Beam loses data (the build's completeness check fails)",
  )
  p.add_argument("--_build", nargs=4, help=argparse.SUPPRESS)
  args = p.parse_args(argv)
  if args._build:  # pylint: disable=protected-access
    name, manual, data_dir, opts = args._build  # pylint: disable=protected-access
    print("RESULT " + json.dumps(build_once(name, manual, data_dir, opts or None)))
    return 0

  print("load before:", _uptime(), flush=True)
  os.makedirs(args.workdir, exist_ok=True)
  datasets = args.datasets.split(",")
  modes = args.modes.split(",")
  env = dict(
    os.environ,
    PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
    TF_CPP_MIN_LOG_LEVEL="3",
  )
  rows = []
  lost = {}
  for name in datasets:
    size = {
      "vidor": args.videos,
      "occlusion_boundaries": args.occlusion_images,
      "visualcomet": args.visualcomet_images,
    }[name]
    manual = _ensure_manual(args, name, "", size)
    # The same build on TINY items measures what a build costs besides its items (Beam's
    # start-up: worker processes, imports, stages); rates "without start-up" leave it out.
    tiny_manual = _ensure_manual(args, name, "_tiny", TINY)
    results = {}
    tiny = {}
    for mode in modes:
      tiny[mode] = _build(args, env, name, mode, tiny_manual, lost)
      results[mode] = _build(args, env, name, mode, manual, lost)
      n = sum(results[mode]["splits"].values())
      driver = "driver" if mode == "plain" else "runner"
      print(
        f"{name:22s} {mode:6s} {n:7d} {REAL[name][1]} {results[mode]['seconds']:8.1f}s "
        f"{n / results[mode]['seconds']:8.2f}/s  cpu {results[mode]['cpu_seconds']:7.1f}s "
        f"({driver} {results[mode]['driver_cpu_seconds']:.1f}s); {TINY} items: "
        f"{tiny[mode]['seconds']:.1f}s cpu {tiny[mode]['cpu_seconds']:.1f}s "
        f"({_uptime().split('load average: ')[-1]})",
        flush=True,
      )

    splits = {m: r["splits"] for m, r in results.items()}
    on_disk = {m: r["records_on_disk"] for m, r in results.items()}
    if len({json.dumps(s, sort_keys=True) for s in [*splits.values(), *on_disk.values()]}) != 1:
      # Reported, not fatal: the other datasets are still measured.
      print(
        f"WARNING {name}: split sizes differ between modes: dataset_info {splits}, "
        f"records in the files {on_disk}",
        flush=True,
      )
    rows.append((name, results, tiny))

  print("load after:", _uptime())
  print()
  print(
    "Wall seconds (items/s) and CPU seconds (this process + Beam workers) per mode; the CPU "
    "figure does not depend on the machine's load."
  )
  print(
    f"| dataset | items | {' | '.join(f'{m} wall s (items/s) | {m} cpu s' for m in modes)} "
    "| beam2/plain wall | beam2/plain, 2 idle cores (from cpu) |"
  )
  print("|---|---|" + "---|---|" * len(modes) + "---|---|")
  speedups = {}
  for name, results, tiny in rows:
    n = sum(next(iter(results.values()))["splits"].values())
    cells = " | ".join(
      f"{results[m]['seconds']:.1f} ({n / results[m]['seconds']:.2f}) | "
      f"{results[m]['cpu_seconds']:.1f}"
      for m in modes
    )
    sp = est = float("nan")
    if "plain" in results and "beam2" in results:
      sp = results["plain"]["seconds"] / results["beam2"]["seconds"]
      # Idle 2-core machine: plain runs on one core, beam2 spreads its CPU over two.
      est = results["plain"]["cpu_seconds"] / (results["beam2"]["cpu_seconds"] / 2)
    speedups[name] = sp
    print(f"| {name} | {n} {REAL[name][1]} | {cells} | {sp:.2f}x | {est:.2f}x |")
  print()
  print(
    "Extrapolation to the real datasets: core-hours = items x plain cpu s per item "
    "(Beam adds its beam2/plain cpu ratio); hours on one idle 2-core machine with beam2; "
    "N cores (one machine or a cluster) divide the core-hours by N:"
  )
  for name, results, tiny in rows:
    n = sum(next(iter(results.values()))["splits"].values())
    for label, real in REAL[name][2].items():
      parts = []
      if "plain" in results:
        per = results["plain"]["cpu_seconds"] / n
        parts.append(f"{per:.3f} cpu s/{REAL[name][1][:-1]}, plain {real * per / 3600:.2f} core-h")
      if "beam2" in results:
        per2 = results["beam2"]["cpu_seconds"] / n
        parts.append(
          f"beam {real * per2 / 3600:.2f} core-h = {real * per2 / 2 / 3600:.2f} h on 2 cores"
        )
      print(f"  {label}: " + ", ".join(parts))
  print()
  print(
    f"Without start-up: (time of N items - time of {TINY}) / (N - {TINY}), i.e. what each "
    "further item costs; CPU ms per item; beam2/plain = speedup of the item rate:"
  )
  marginal = {}
  for name, results, tiny in rows:
    n = sum(next(iter(results.values()))["splits"].values())
    n0 = sum(next(iter(tiny.values()))["splits"].values())
    per = {
      m: (
        (results[m]["seconds"] - tiny[m]["seconds"]) / (n - n0),
        (results[m]["cpu_seconds"] - tiny[m]["cpu_seconds"]) / (n - n0),
      )
      for m in modes
    }
    start = ", ".join(f"{m} {tiny[m]['seconds']:.1f}s" for m in modes)
    cells = "; ".join(
      f"{m} {1000 * w:.1f} ms wall, {1000 * c:.1f} ms cpu" for m, (w, c) in per.items()
    )
    line = f"  {name} (start-up and {n0} items: {start}): {cells}"
    if "plain" in per and "beam2" in per:
      marginal[name] = per["plain"][0] / per["beam2"][0]
      line += f"; beam2/plain {marginal[name]:.2f}x"
    print(line)
  print()
  print(
    "Beam's runner process (it receives every element a stage writes and sends it to the next "
    "stage's worker) and its workers, CPU ms per item (start-up included):"
  )
  for name, results, tiny in rows:
    n = sum(next(iter(results.values()))["splits"].values())
    parts = [
      f"{m} runner {1000 * results[m]['driver_cpu_seconds'] / n:.1f} ms, workers "
      f"{1000 * (results[m]['cpu_seconds'] - results[m]['driver_cpu_seconds']) / n:.1f} ms"
      for m in modes
      if m != "plain"
    ]
    if "plain" in results:
      parts.insert(0, f"plain {1000 * results['plain']['cpu_seconds'] / n:.1f} ms")
    print(f"  {name}: " + "; ".join(parts))
  for (name, mode), k in sorted(lost.items()):
    print(f"LOST DATA: {name} {mode}: Beam lost examples in {k} build(s) (rebuilt; see above)")
  print(
    "prepare: beam2/plain "
    + " ".join(f"{k}={v:.2f}x" for k, v in speedups.items())
    + "; without start-up "
    + " ".join(f"{k}={v:.2f}x" for k, v in marginal.items())
  )
  return 0


if __name__ == "__main__":
  sys.exit(main())
