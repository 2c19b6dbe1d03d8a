"""Submission validator for video relation detection.

Reports every problem at once, each with video id, prediction index and
field. Two levels:

  error    the record breaks the format so that the official scorer fails
           on it whenever it touches it (missing fields, wrong types, boxes
           that are not 4 finite numbers, a `results` that is not an object). The CLI
           refuses a submission with errors.
  warning  the official scorer still scores it, with its quirks, and so do
           we: `version` missing or not "VERSION 1.0" (the scorer reads only
           `results`), unknown categories / predicates (never match), a box
           count that differs from the duration (volumes use the list
           length; a box needed by the shared window that is missing makes
           the scorer raise, which scoring reports exactly), inverted boxes
           (not clipped, "+1" areas), non-finite scores,
           empty durations, per-video counts over the protocol limit (VRU'19
           rules: at most 2000; VRU'20 scorer: keeps the top 200 - the
           official cut is applied, never a refusal), predictions for videos
           without ground truth (ignored by the scorer; their errors are
           reported as warnings for that reason).

  python -m relations.video_relations.metrics.validate PRED [--groundtruth GT]
      [--protocol helper|vru20] [--dataset vidor|vidvrd]

`validate_submission` checks a parsed submission (the oracle);
`ColumnarValidator` / `validate_file` give the same report from a file read
into columns (`fastjson`), as the CLI does.
"""

import collections
import dataclasses
import itertools
import math
import sys
from typing import Any, Mapping

import numpy as np

from relations import cli_errors
from relations.video_relations.data import categories as vrd_categories

VERSION = "VERSION 1.0"
LIMITS = {"helper": 2000, "vru20": 200}
_chain = itertools.chain.from_iterable


@dataclasses.dataclass(frozen=True)
class Problem:
  level: str  # "error" or "warning"
  video: str | None
  index: int | None
  field: str | None
  message: str

  def __str__(self):
    where = []
    if self.video is not None:
      where.append(f"video {self.video!r}")
    if self.index is not None:
      where.append(f"prediction {self.index}")
    if self.field is not None:
      where.append(f"field {self.field!r}")
    return f"{self.level}: {', '.join(where) or 'submission'}: {self.message}"


@dataclasses.dataclass
class Report:
  problems: list

  @property
  def errors(self):
    return [p for p in self.problems if p.level == "error"]

  @property
  def warnings(self):
    return [p for p in self.problems if p.level == "warning"]

  @property
  def ok(self) -> bool:
    return not self.errors

  def summary(self, limit: int = 30) -> str:
    """First `limit` problems plus counts per level and field."""
    lines = [str(p) for p in self.problems[:limit]]
    if len(self.problems) > limit:
      lines.append(f"... and {len(self.problems) - limit} more")
    kinds = collections.Counter((p.level, p.field) for p in self.problems)
    lines.append(
      f"{len(self.errors)} errors, {len(self.warnings)} warnings"
      + (
        ""
        if not kinds
        else " ("
        + ", ".join(f"{lvl} {fld}: {n}" for (lvl, fld), n in sorted(kinds.items(), key=str))
        + ")"
      )
    )
    return "\n".join(lines)


def _is_number(x):
  return isinstance(x, (int, float)) and not isinstance(x, bool)


def _check_traj(traj, key, duration_len, add):
  if not isinstance(traj, list):
    add("error", key, f"expected a list of boxes, got {type(traj).__name__}")
    return
  bad = [
    j
    for j, b in enumerate(traj)
    if not isinstance(b, (list, tuple)) or len(b) != 4 or not all(map(_is_number, b))
  ]
  if bad:
    add("error", key, f"{len(bad)} boxes are not 4 numbers (first: box {bad[0]}: {traj[bad[0]]!r})")
    return
  if duration_len is not None and len(traj) != duration_len:
    add(
      "warning",
      key,
      f"{len(traj)} boxes for a duration of {duration_len} frames (one box per frame expected)",
    )
  nonfinite = [j for j, b in enumerate(traj) if not all(map(math.isfinite, b))]
  if nonfinite:
    # The scorer's integer box areas cannot hold NaN / inf: refuse here, by box.
    add(
      "error",
      key,
      f"{len(nonfinite)} boxes with non-finite coordinates (first: box "
      f"{nonfinite[0]}: {list(traj[nonfinite[0]])}); expected finite numbers",
    )
    return
  inverted = [j for j, b in enumerate(traj) if b[0] > b[2] or b[1] > b[3]]
  if inverted:
    add(
      "warning",
      key,
      f"{len(inverted)} inverted boxes (x1 > x2 or y1 > y2;"
      f" first: box {inverted[0]}: {list(traj[inverted[0]])}), scored "
      "unclipped as the official code does",
    )


def _check_prediction(p, known, add):
  if not isinstance(p, Mapping):
    add("error", None, f"expected an object, got {type(p).__name__}")
    return
  for key in ("triplet", "score", "duration", "sub_traj", "obj_traj"):
    if key not in p:
      add("error", key, "missing")
  t = p.get("triplet")
  if "triplet" in p:
    if not isinstance(t, list) or not all(isinstance(x, str) for x in t):
      add("error", "triplet", f"expected [subject, predicate, object] strings, got {t!r}")
    elif len(t) != 3:
      add("warning", "triplet", f"{len(t)} names instead of 3: {t!r}")
    elif known is not None:
      objects, predicates = known
      for name, pool, what in (
        (t[0], objects, "subject category"),
        (t[1], predicates, "predicate"),
        (t[2], objects, "object category"),
      ):
        if name not in pool:
          add("warning", "triplet", f"unknown {what} {name!r}")
  s = p.get("score")
  if "score" in p:
    if not _is_number(s):
      add("error", "score", f"not a number: {s!r}")
    elif not math.isfinite(s):
      add(
        "warning",
        "score",
        f"non-finite score {s!r} (the official scorer "
        "counts such a prediction as a false positive)",
      )
  d = p.get("duration")
  dlen = None
  if "duration" in p:
    if (
      not isinstance(d, list)
      or len(d) != 2
      or not all(isinstance(x, int) and not isinstance(x, bool) for x in d)
    ):
      add("error", "duration", f"expected [start, end) integer frames, got {d!r}")
    else:
      dlen = d[1] - d[0]
      if dlen <= 0:
        add("warning", "duration", f"empty duration {d!r}")
      if d[0] < 0:
        add("warning", "duration", f"negative start frame {d!r}")
  for key in ("sub_traj", "obj_traj"):
    if key in p:
      _check_traj(p[key], key, dlen, add)


def validate_submission(
  submission: Any,
  groundtruth: Mapping | None = None,
  protocol: str = "helper",
  dataset: str | None = None,
) -> Report:
  """Checks a parsed submission; see the module docstring for the rules.

  Args:
    submission: the parsed JSON object.
    groundtruth: optional {video_id: [...]}: predictions of videos not in it
      are ignored by the scorer, so their problems become warnings.
    protocol: "helper" (limit 2000 per video) or "vru20" (top 200 kept).
    dataset: "vidor" / "vidvrd" to check names against the category lists;
      None infers it from the first video id, "" skips the name check.

  Returns:
    `Report` with all problems.
  """
  problems = []
  if not isinstance(submission, Mapping):
    problems.append(Problem("error", None, None, None, "expected a JSON object with 'results'"))
    return Report(problems)
  version = submission.get("version")
  if version != VERSION:
    problems.append(
      Problem(
        "warning",
        None,
        None,
        "version",
        f"expected {VERSION!r}, got {version!r} (not read by the scorer)",
      )
    )
  results = submission.get("results")
  if not isinstance(results, Mapping):
    problems.append(
      Problem("error", None, None, "results", "missing or not an object {video_id: [...]}")
    )
    return Report(problems)
  if dataset is None and results:
    dataset = vrd_categories.dataset_of_video_id(str(next(iter(results))))
  known = None
  if dataset:
    known = (
      set(vrd_categories.object_categories(dataset)),
      set(vrd_categories.predicates(dataset)),
    )
  limit = LIMITS[protocol]
  for vid, preds in results.items():
    ignored = groundtruth is not None and not groundtruth.get(vid)
    if not isinstance(preds, list):
      problems.append(
        Problem("warning" if ignored else "error", vid, None, None, "predictions must be a list")
      )
      continue
    if ignored:
      problems.append(
        Problem(
          "warning",
          vid,
          None,
          None,
          f"{len(preds)} predictions for a video without ground truth (ignored by the scorer)",
        )
      )
    if len(preds) > limit:
      problems.append(
        Problem(
          "warning",
          vid,
          None,
          None,
          f"{len(preds)} predictions > {limit} "
          + (
            "(VRU'19 rules accepted at most 2000 per video)"
            if protocol == "helper"
            else "(the VRU'20 scorer keeps the top 200 by score)"
          ),
        )
      )
    for i, p in enumerate(preds):

      def add(level, field, message, vid=vid, i=i, ignored=ignored):
        if ignored and level == "error":
          level = "warning"
        problems.append(Problem(level, vid, i, field, message))

      _check_prediction(p, known, add)
  return Report(problems)


class ColumnarValidator:
  """`validate_submission` on `fastjson` chunks: the same problems, in the
  same order, without the submission's object tree.

  Plain records are checked on the columns (names against the category
  lists, box count against the duration); a record the scanner flags
  (irregular, or a non-finite / inverted / empty value) is decoded alone
  and checked by the same code as `validate_submission`, so every message
  is the dict validator's.

  Feed it the events of `fastjson.scan_document(path)`: `chunk`, `version`,
  `results_again`, `end`, `not_object`; then `report()`.

  Args:
    groundtruth: None, or {video_id: number of GT instances} (any mapping
      whose value is falsy for videos without ground truth).
    protocol, dataset: as `validate_submission`.
  """

  def __init__(
    self, groundtruth: Mapping | None = None, protocol: str = "helper", dataset: str | None = None
  ):
    self.groundtruth = groundtruth
    self.protocol = protocol
    self.limit = LIMITS[protocol]
    self.dataset_arg = dataset
    self.version = None
    self.results_kind = 0
    self.not_object = False
    self.videos = {}  # video id -> [Problem] (json.load's dict order)
    self.errors_in = set()  # videos with an error
    self._reset()

  def _reset(self):
    self.videos.clear()
    self.errors_in.clear()
    self.dataset = self.dataset_arg
    self.known = None
    self._ok = None  # [names, 3] bool, name id known in that slot
    self._first = True

  def event(self, kind: str, value: Any) -> None:
    """One event of `fastjson.scan_document`."""
    if kind == "chunk":
      self.add_chunk(value)
    elif kind == "version":
      self.version = value
    elif kind == "results_again":
      self._reset()
    elif kind == "end":
      self.results_kind = value
    elif kind == "not_object":
      self.not_object = True

  def _known_ok(self, vocab):
    """[len(vocab.names), 3] bool: the name is known as subject, predicate,
    object (extended as the vocabulary grows)."""
    have = 0 if self._ok is None else len(self._ok)
    if have < len(vocab.names):
      objects, predicates = self.known
      new = np.asarray(
        [(n in objects, n in predicates, n in objects) for n in vocab.names[have:]], bool
      ).reshape(-1, 3)
      self._ok = new if self._ok is None else np.concatenate([self._ok, new])
    return self._ok

  def add_chunk(self, chunk) -> None:
    """Problems of the chunk's videos."""
    if self._first and chunk.video_ids:
      self._first = False
      if self.dataset is None:
        self.dataset = vrd_categories.dataset_of_video_id(str(chunk.video_ids[0]))
      if self.dataset:
        self.known = (
          set(vrd_categories.object_categories(self.dataset)),
          set(vrd_categories.predicates(self.dataset)),
        )
    flag = chunk.flag
    plain = flag == 0
    dlen = chunk.duration[:, 1] - chunk.duration[:, 0]
    mismatch = plain[:, None] & (chunk.traj[:, :, 1] != dlen[:, None])
    flagged = (flag != 0) | mismatch.any(1)
    unknown = None
    if self.known is not None and plain.any():
      ok = self._known_ok(chunk.vocab)
      names = np.where(plain[:, None], chunk.names, 0)
      unknown = plain[:, None] & ~ok[names, np.arange(3)]
      flagged |= unknown.any(1)
    flagged_rows = np.flatnonzero(flagged)
    rows = chunk.rows.tolist()
    for v, vid in enumerate(chunk.video_ids):
      problems = []
      ignored = self.groundtruth is not None and not self.groundtruth.get(vid)
      if not chunk.is_list[v]:
        problems.append(
          Problem("warning" if ignored else "error", vid, None, None, "predictions must be a list")
        )
      else:
        count = rows[v + 1] - rows[v]
        if ignored:
          problems.append(
            Problem(
              "warning",
              vid,
              None,
              None,
              f"{count} predictions for a video without ground truth (ignored by the scorer)",
            )
          )
        if count > self.limit:
          problems.append(
            Problem(
              "warning",
              vid,
              None,
              None,
              f"{count} predictions > {self.limit} "
              + (
                "(VRU'19 rules accepted at most 2000 per video)"
                if self.protocol == "helper"
                else "(the VRU'20 scorer keeps the top 200 by score)"
              ),
            )
          )
        lo, hi = np.searchsorted(flagged_rows, (rows[v], rows[v + 1]))
        for r in flagged_rows[lo:hi].tolist():
          i = r - rows[v]

          def add(level, field, message, vid=vid, i=i, ignored=ignored, problems=problems):
            if ignored and level == "error":
              level = "warning"
            problems.append(Problem(level, vid, i, field, message))

          if flag[r]:
            _check_prediction(chunk.decode(r), self.known, add)
            continue
          if unknown is not None:
            for k, what in enumerate(("subject category", "predicate", "object category")):
              if unknown[r, k]:
                name = chunk.vocab.names[chunk.names[r, k]]
                add("warning", "triplet", f"unknown {what} {name!r}")
          for side, key in enumerate(("sub_traj", "obj_traj")):
            if mismatch[r, side]:
              add(
                "warning",
                key,
                f"{chunk.traj[r, side, 1]} boxes for a "
                f"duration of {int(dlen[r])} frames (one box per frame "
                "expected)",
              )
      self.videos[vid] = problems
      if any(p.level == "error" for p in problems):
        self.errors_in.add(vid)
      else:
        self.errors_in.discard(vid)

  def report(self) -> Report:
    """All problems, as `validate_submission` lists them."""
    if self.not_object:
      return Report([Problem("error", None, None, None, "expected a JSON object with 'results'")])
    problems = []
    if self.version != VERSION:
      problems.append(
        Problem(
          "warning",
          None,
          None,
          "version",
          f"expected {VERSION!r}, got {self.version!r} (not read by the scorer)",
        )
      )
    if self.results_kind != 1:
      problems.append(
        Problem("error", None, None, "results", "missing or not an object {video_id: [...]}")
      )
      return Report(problems)
    for video_problems in self.videos.values():
      problems.extend(video_problems)
    return Report(problems)


def validate_file(
  path: str,
  groundtruth: Mapping | None = None,
  protocol: str = "helper",
  dataset: str | None = None,
  unique_keys: bool = False,
) -> Report:
  """`validate_submission` of a `.json` / `.json.xz` file, read into columns
  (`ColumnarValidator`). Raises `fastjson.FormatError` on a file that is not
  JSON, and (`unique_keys`, as the evaluator) on one that repeats a video id
  or a top-level key; by default a repeated key keeps its last value, as
  `json.load` would."""
  from relations.video_relations.metrics import fastjson  # pylint: disable=g-import-not-at-top

  v = ColumnarValidator(groundtruth, protocol, dataset)
  for kind, value in fastjson.scan_document(path, unique_keys=unique_keys):
    v.event(kind, value)
  return v.report()


@cli_errors.entry_point
def main(argv=None) -> int:
  from relations.video_relations.metrics import io  # pylint: disable=g-import-not-at-top

  ap = cli_errors.ArgumentParser(
    prog="python -m relations.video_relations.metrics.validate",
    description="Validate a VidOR / VidVRD relation detection submission.",
  )
  ap.add_argument("prediction", type=cli_errors.existing_file)
  ap.add_argument("--groundtruth", type=cli_errors.existing_path)
  ap.add_argument("--protocol", choices=sorted(LIMITS), default="helper")
  ap.add_argument("--dataset", choices=["vidor", "vidvrd"])
  args = ap.parse_args(argv)
  from relations.video_relations.metrics import fastjson  # pylint: disable=g-import-not-at-top

  gt = None
  if args.groundtruth:
    table = io.read_groundtruth_table(args.groundtruth, args.dataset)
    gt = {v: int(table.bounds[i + 1] - table.bounds[i]) for i, v in enumerate(table.video_ids)}
  try:
    # The evaluator refuses a submission with a repeated video (a JSON reader would silently keep
    # only the last one); the validator says so too.
    rep = validate_file(args.prediction, gt, args.protocol, args.dataset, unique_keys=True)
  except fastjson.FormatError as e:
    print(f"error: {e.message(args.prediction)}", file=sys.stderr)  # the evaluator's words
    return 2
  print(rep.summary(limit=10**9))
  return 0 if rep.ok else 1


if __name__ == "__main__":
  sys.exit(main())
