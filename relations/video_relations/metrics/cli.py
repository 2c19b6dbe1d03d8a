"""VidOR / ImageNet-VidVRD relation detection evaluation CLI.

  python -m relations.evaluate vidor --groundtruth GT --prediction PRED
      [--protocol helper|vru20] [--zero-shot TRAIN_GT] [--per-video]
      [--dataset vidor|vidvrd] [--output metrics.json]

GT: an official annotation folder (e.g. `annotation/validation`, or VidVRD
`test`), one annotation file, or one consolidated GT JSON
`{video_id: [{triplet, subject_tid, object_tid, duration, sub_traj,
obj_traj}]}`; a folder is read in the official loaders' `glob` order (the
mAP's summation order). PRED: a submission `.json` / `.json.xz`.

The submission is validated first (every problem listed at once; format
errors refuse, quirks the official scorer accepts are warnings and scored
exactly as it does). Metrics are fractions: mAP, R@50, R@100, P@1, P@5, P@10.
With --zero-shot, the triplets of GT absent from TRAIN_GT define two more
evaluations: "zero_shot" (zero-shot GT and zero-shot predictions, xdshang
`evaluate.py`) and "generalized_zero_shot" (zero-shot GT, all predictions,
the VRU'20 server's `evaluate.py`).
"""

import sys

from relations import cli_errors
from relations.video_relations.data import annotations as vrd_json
from relations.video_relations.metrics import io
from relations.video_relations.metrics import scoring
from relations.video_relations.metrics import validate


def _table(name, result):
  d = result.as_dict()
  head = " ".join(f"{k:>8}" for k in d)
  vals = " ".join(f"{v:8.4f}" for v in d.values())
  return (f"{name} ({result.num_videos} videos, {result.num_gt} GT "
          f"relations)\n{head}\n{vals}")


@cli_errors.entry_point
def main(argv=None) -> int:
  ap = cli_errors.ArgumentParser(
      prog="python -m relations.evaluate vidor",
      description="Video relation detection / tagging, official numbers.")
  ap.add_argument("--groundtruth", required=True, type=cli_errors.existing_path)
  ap.add_argument("--prediction", required=True, type=cli_errors.existing_file)
  ap.add_argument("--protocol", choices=scoring.PROTOCOLS, default="helper")
  ap.add_argument("--zero-shot", dest="zero_shot", metavar="TRAIN_GT",
                  type=cli_errors.existing_path)
  ap.add_argument("--per-video", dest="per_video", action="store_true")
  ap.add_argument("--dataset", choices=["vidor", "vidvrd"],
                  help="category lists for the validator (default: from "
                  "the video ids)")
  ap.add_argument("--output", help="write the metrics JSON here",
                  type=cli_errors.output_file)
  ap.add_argument("--official-lines", action="store_true",
                  help="also print the official script's six lines")
  args = ap.parse_args(argv)

  try:
    gt = io.load_groundtruth(args.groundtruth, args.dataset)
    sub = io.load_submission(args.prediction)
  except (FileNotFoundError, io.SubmissionError,
          vrd_json.AnnotationError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  report = validate.validate_submission(sub, gt, args.protocol,
                                        args.dataset)
  if report.problems:
    print(report.summary(), file=sys.stderr)
  if not report.ok:
    print(f"error: {args.prediction}: {len(report.errors)} format errors; "
          "not scored", file=sys.stderr)
    return 1
  results = sub["results"]
  out = {"protocol": args.protocol, "groundtruth": args.groundtruth,
         "prediction": args.prediction}
  try:
    res = scoring.evaluate(gt, results, args.protocol)
    print(_table("all", res))
    if args.official_lines:
      print("\n".join(res.official_lines()))
    out.update(res.as_dict())
    out.update(num_videos=res.num_videos, num_gt=res.num_gt,
               num_warnings=len(report.warnings))
    if args.per_video:
      out["per_video_ap"] = {v: float(ap) for v, ap in res.video_ap.items()}
    if args.zero_shot:
      try:
        train = io.load_groundtruth(args.zero_shot, args.dataset)
      except (FileNotFoundError, vrd_json.AnnotationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
      zs = scoring.zero_shot_triplets(gt, train)
      out["num_zero_shot_triplets"] = len(zs)
      for name, generalized in (("zero_shot", False),
                                ("generalized_zero_shot", True)):
        g, p = scoring.zero_shot_split(gt, results, zs, generalized)
        if not g:
          print(f"{name}: no zero-shot ground truth; not scored")
          out[name] = None
          continue
        r = scoring.evaluate(g, p, args.protocol)
        print(_table(name, r))
        out[name] = dict(r.as_dict(), num_videos=r.num_videos,
                         num_gt=r.num_gt)
        if args.per_video:
          out[name]["per_video_ap"] = {v: float(ap)
                                       for v, ap in r.video_ap.items()}
  except scoring.ScoringError as e:
    print(f"error: {args.prediction}: cannot be scored: {e}",
          file=sys.stderr)
    return 1
  if args.output:
    io.write_json_atomic(args.output, out)
    print(f"wrote {args.output}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
