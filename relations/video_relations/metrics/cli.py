"""VidOR / ImageNet-VidVRD relation detection evaluation CLI.

  python -m relations.evaluate video_relations --groundtruth GT --prediction PRED
      [--protocol helper|vru20] [--zero-shot TRAIN_GT] [--per-video]
      [--dataset vidor|vidvrd] [--output metrics.json] [--breakdown [--duration-bins 90,300]]

GT: an official annotation folder (e.g. `annotation/validation`, or VidVRD
`test`), one annotation file, or one consolidated GT JSON
`{video_id: [{triplet, subject_tid, object_tid, duration, sub_traj,
obj_traj}]}`; a folder is read in the official loaders' `glob` order (the
mAP's summation order). PRED: a submission `.json` / `.json.xz`.

The submission is read window by window straight into arrays (no Python
object per box; `fastjson`), validated on those columns (every problem
listed at once, the messages of `validate.validate_submission`; format
errors refuse, quirks the official scorer accepts are warnings and scored
exactly as it does) and scored chunk by chunk on the arrays
(`scoring.TableEvaluation`). A video id or top-level key given twice is
refused (exit status 2, as `io.load_submission`: json.load would drop all
but the last). Metrics are fractions: mAP, R@50, R@100, P@1, P@5, P@10.
With --zero-shot, the triplets of GT absent from TRAIN_GT define two more
evaluations: "zero_shot" (zero-shot GT and zero-shot predictions, xdshang
`evaluate.py`) and "generalized_zero_shot" (zero-shot GT, all predictions,
the VRU'20 server's `evaluate.py`). An evaluation the official code could
not score is reported (exit status 1, "error" in the metrics JSON) and the
others are still scored. --official-lines prints the official script's six
lines after each evaluation's table. --breakdown adds the numbers per
predicate type (action / spatial), predicate, subject and object category
and relation duration (`metrics/breakdown.py`: the official scorer on
filtered copies; the submission is then also read as a Python object tree).
"""

import queue
import sys
import threading

import numpy as np

from relations import cli_errors
from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.metrics import fastjson
from relations.video_relations.metrics import io
from relations.video_relations.metrics import scoring
from relations.video_relations.metrics import validate


def _table(name, result):
  d = result.as_dict()
  head = " ".join(f"{k:>8}" for k in d)
  vals = " ".join(f"{v:8.4f}" for v in d.values())
  return f"{name} ({result.num_videos} videos, {result.num_gt} GT relations)\n{head}\n{vals}"


def _evaluations(gt, zs_gt, protocol):
  """[(name, TableEvaluation or None)]: "all", then the zero-shot ones."""
  out = [("all", scoring.TableEvaluation(gt, protocol))]
  if zs_gt is not None:
    for name, filtered in (("zero_shot", True), ("generalized_zero_shot", False)):
      out.append(
        (
          name,
          scoring.TableEvaluation(zs_gt, protocol, filter_predictions=filtered)
          if zs_gt.video_ids
          else None,
        )
      )
  return out


class _Consumer:
  """Validates and scores the events of one pass over the submission.

  Runs in a thread of its own (`run`), fed through a one-slot queue while
  the main thread scans the next window: the scan and the compiled matcher
  release the GIL, so the two overlap on two cores.
  """

  def __init__(self, gt_job, protocol, dataset, validate_too=True):
    self.gt_job = gt_job
    self.protocol = protocol
    self.dataset = dataset
    self.validate_too = validate_too
    self.queue = queue.Queue(maxsize=1)
    self.failed = threading.Event()
    self.error = None
    self.validator = None
    self.evaluations = None
    self.complete = True

  def run(self):
    ended = False
    try:
      self.gt_job.join()
      if self.gt_job.error is not None:
        return
      gt, zs_gt = self.gt_job.gt, self.gt_job.zs_gt
      if self.validate_too:
        counts = {vid: int(gt.bounds[i + 1] - gt.bounds[i]) for i, vid in enumerate(gt.video_ids)}
        self.validator = validate.ColumnarValidator(counts, self.protocol, self.dataset)
      self.evaluations = _evaluations(gt, zs_gt, self.protocol)
      while True:
        item = self.queue.get()
        if item is None:
          ended = True
          return
        self._event(*item, gt, zs_gt)
    except BaseException as e:  # pylint: disable=broad-except
      self.error = e
    finally:
      if not ended:  # stop the scanner, take what it sends
        self.failed.set()
        while self.queue.get() is not None:
          pass

  def _event(self, kind, value, gt, zs_gt):
    if self.validator is not None:
      self.validator.event(kind, value)
    if kind == "results_again":
      self.evaluations = _evaluations(gt, zs_gt, self.protocol)
      self.complete = True
    elif kind == "chunk":
      if self.validator is not None and self.validator.errors_in:
        self.complete = False  # refused anyway (unless repaired later)
        return
      table = fastjson.chunk_table(value)
      for _, ev in self.evaluations:
        if ev is not None:
          ev.add(table)


class _GroundTruthJob(threading.Thread):
  """Reads the GT (and the training GT's triplets) in a thread: it overlaps
  the first windows of the submission."""

  def __init__(self, args):
    super().__init__(daemon=True)
    self.args = args
    self.gt = self.zs_gt = self.zs = self.error = None

  def run(self):
    args = self.args
    try:
      self.gt = io.read_groundtruth_table(args.groundtruth, args.dataset)
      if args.zero_shot:
        train = io.read_groundtruth_table(args.zero_shot, args.dataset, keep_boxes=False)
        self.zs, self.zs_gt = zero_shot_table(self.gt, train)
    except (FileNotFoundError, vrd_json.AnnotationError) as e:
      self.error = e
    except BaseException as e:  # pylint: disable=broad-except
      self.error = e


def zero_shot_table(gt, train):
  """(zero-shot triplets, the rows of `gt` with one): triplets of `gt` absent from `train`
  (both `columns.RelationTable`; `train` may hold no boxes)."""
  zs = set(gt.triplets) - set(train.triplets)
  is_zs = np.asarray([t in zs for t in gt.triplets], bool)
  return zs, gt.select_rows(is_zs[gt.triplet] if len(is_zs) else np.zeros(len(gt), bool))


def _pass(path, gt_job, protocol, dataset, validate_too=True):
  """One pass over the submission; returns the finished `_Consumer`.

  Raises what the scan raises (`fastjson.FormatError`, OSError).
  """
  consumer = _Consumer(gt_job, protocol, dataset, validate_too)
  worker = threading.Thread(target=consumer.run, daemon=True)
  worker.start()
  try:
    for event in fastjson.scan_document(path, detach=True, unique_keys=True):
      if consumer.failed.is_set():
        break
      consumer.queue.put(event)
  finally:
    consumer.queue.put(None)
    worker.join()
  if consumer.error is not None:
    raise consumer.error
  return consumer


class _Ready:
  """A ground truth already read, in the shape `_Consumer` waits for."""

  def __init__(self, gt, zs_gt=None):
    self.gt, self.zs_gt, self.error = gt, zs_gt, None

  def join(self):
    pass


def score_file(path: str, groundtruth, protocol: str = "helper", dataset: str | None = None):
  """Validates and scores a submission file as the CLI does: one streaming pass, columns only.

  Args:
    path: the submission (`.json` or `.json.xz`).
    groundtruth: `columns.RelationTable` (`io.read_groundtruth_table`).
    protocol: "helper" / "vru20"; dataset: category lists for the validator.

  Returns:
    (the validator's report, `scoring.Result` or None when the report has errors).

  Raises:
    fastjson.FormatError (not JSON, not a submission), scoring.ScoringError, OSError.
  """
  report, results = score_file_evaluations(path, groundtruth, protocol, dataset)
  return report, None if results is None else results["all"]


def score_file_evaluations(
  path: str, groundtruth, protocol: str = "helper", dataset: str | None = None, zero_shot_gt=None
):
  """`score_file` with the CLI's zero-shot evaluations too.

  Args:
    zero_shot_gt: the zero-shot rows of `groundtruth` (`zero_shot_table`), or None.

  Returns:
    (report, None when the report has errors, else {"all": Result} plus, with `zero_shot_gt`,
    "zero_shot" and "generalized_zero_shot": a `scoring.Result`, or None where no zero-shot GT).
  """
  ready = _Ready(groundtruth, zero_shot_gt)
  consumer = _pass(path, ready, protocol, dataset)
  report = consumer.validator.report()
  if not report.ok:
    return report, None
  evaluations = consumer.evaluations
  if not consumer.complete:  # an error that a repeated video id later replaced: score again
    evaluations = _pass(path, ready, protocol, dataset, validate_too=False).evaluations
  return report, {name: None if ev is None else ev.result() for name, ev in evaluations}


def _duration_bins(text: str) -> tuple[int, ...]:
  """argparse type of --duration-bins: increasing comma-separated native-frame edges."""
  import argparse  # pylint: disable=import-outside-toplevel

  try:
    bins = tuple(int(b) for b in text.split(","))
  except ValueError:
    raise argparse.ArgumentTypeError(f"not comma-separated integers: {text!r}") from None
  if list(bins) != sorted(set(bins)):
    raise argparse.ArgumentTypeError(f"edges must increase: {text!r}")
  return bins


@cli_errors.entry_point
def main(argv=None) -> int:
  ap = cli_errors.ArgumentParser(
    prog="python -m relations.evaluate video_relations",
    description="Video relation detection / tagging, official numbers.",
  )
  ap.add_argument("--groundtruth", required=True, type=cli_errors.existing_path)
  ap.add_argument("--prediction", required=True, type=cli_errors.existing_file)
  ap.add_argument("--protocol", choices=scoring.PROTOCOLS, default="helper")
  ap.add_argument(
    "--zero-shot", dest="zero_shot", metavar="TRAIN_GT", type=cli_errors.existing_path
  )
  ap.add_argument("--per-video", dest="per_video", action="store_true")
  ap.add_argument(
    "--dataset",
    choices=["vidor", "vidvrd"],
    help="category lists for the validator (default: from the video ids)",
  )
  ap.add_argument("--output", help="write the metrics JSON here", type=cli_errors.output_file)
  ap.add_argument(
    "--official-lines", action="store_true", help="also print the official script's six lines"
  )
  ap.add_argument(
    "--breakdown",
    action="store_true",
    help="also the per predicate type / predicate / subject / object / duration numbers "
    "(metrics/breakdown.py; 'breakdown' in the metrics JSON)",
  )
  ap.add_argument(
    "--duration-bins",
    dest="duration_bins",
    default=(90, 300),
    type=_duration_bins,
    help="native-frame edges of the duration breakdown (default 90,300: short/medium/long)",
  )
  args = ap.parse_args(argv)
  return _evaluate(args)


def _evaluate(args) -> int:
  """The CLI's work on parsed arguments; returns the exit status."""

  gt_job = _GroundTruthJob(args)
  gt_job.start()
  scan_error = None
  try:
    consumer = _pass(args.prediction, gt_job, args.protocol, args.dataset)
  except fastjson.FormatError as e:
    scan_error = f"error: {e.message(args.prediction)}"
  except OSError as e:
    scan_error = f"error: {e}"
  gt_job.join()
  if gt_job.error is not None:
    if not isinstance(gt_job.error, (FileNotFoundError, vrd_json.AnnotationError)):
      raise gt_job.error
    print(f"error: {gt_job.error}", file=sys.stderr)
    return 2
  if scan_error is not None:
    print(scan_error, file=sys.stderr)
    return 2
  zs = gt_job.zs
  report = consumer.validator.report()
  evaluations = consumer.evaluations
  if report.ok and not consumer.complete:
    # An error that a repeated video id later replaced: score again.
    evaluations = _pass(
      args.prediction, gt_job, args.protocol, args.dataset, validate_too=False
    ).evaluations
  if report.problems:
    print(report.summary(), file=sys.stderr)
  if not report.ok:
    print(
      f"error: {args.prediction}: {len(report.errors)} format errors; not scored", file=sys.stderr
    )
    return 1
  out = {"protocol": args.protocol, "groundtruth": args.groundtruth, "prediction": args.prediction}
  failed = False
  # Each evaluation stands alone (the official scripts run them
  # separately): one that cannot be scored does not stop the others.
  for name, ev in evaluations:
    if ev is None:
      print(f"{name}: no zero-shot ground truth; not scored")
      out[name] = None
      continue
    try:
      res = ev.result()
    except scoring.ScoringError as e:
      print(
        f"error: {args.prediction}: cannot be scored{'' if name == 'all' else f' ({name})'}: {e}",
        file=sys.stderr,
      )
      failed = True
      if name == "all":
        out["error"] = str(e)
      else:
        out[name] = {"error": str(e)}
      continue
    print(_table(name, res))
    if args.official_lines:
      print("\n".join(res.official_lines()))
    metrics = dict(res.as_dict(), num_videos=res.num_videos, num_gt=res.num_gt)
    if args.per_video:
      metrics["per_video_ap"] = {v: float(ap) for v, ap in res.video_ap.items()}
    if name == "all":
      metrics["num_warnings"] = len(report.warnings)
      out.update(metrics)
      if args.zero_shot:
        out["num_zero_shot_triplets"] = len(zs)
    else:
      out[name] = metrics
  if args.breakdown and not failed:
    from relations.video_relations.metrics import breakdown  # pylint: disable=import-outside-toplevel

    table = breakdown.breakdown(
      io.load_groundtruth(args.groundtruth, args.dataset),
      io.load_submission(args.prediction)["results"],
      args.protocol,
      args.dataset,
      args.duration_bins,
    )
    print(breakdown.format_breakdown(table))
    out["breakdown"] = table
  if args.output:
    io.write_json_atomic(args.output, out)
    print(f"wrote {args.output}")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
