"""Official submission JSON (VidVRD-helper / VRU challenge format).

```
{"version": "VERSION 1.0",
 "results": {"<video_id>": [{"triplet": [s, p, o], "score": float,
                             "duration": [begin, end],   # end exclusive
                             "sub_traj": [[x1, y1, x2, y2], ...],
                             "obj_traj": [...]}, ...]},
 "external_data": {"used": bool, "details": str}}
```
One box per native frame of `duration`. Files are written to a temporary name
in the target directory and renamed, so a reader never sees half a file.
"""

import json
import lzma
import os

import numpy as np

from relations import io_util

# Per-video limits of the two protocols: the VRU'20 scorer
# keeps the top 200 per video; the VRU'19 rules accepted at most 2000.
PROTOCOL_LIMITS = {"vru20": 200, "helper": 2000}


def cut_per_video(relations, protocol="vru20", limit=None):
  """Top relations by score, the per-video cut of a protocol.

  Args:
    relations: list of objects with a `.score` or dicts with `"score"`.
    protocol: "vru20" (200) or "helper" (2000).
    limit: overrides the protocol's limit.

  Returns:
    The first `limit` relations by descending score (stable for ties).
  """
  if limit is None:
    if protocol not in PROTOCOL_LIMITS:
      raise ValueError(f"unknown protocol {protocol!r}; expected one of {sorted(PROTOCOL_LIMITS)}")
    limit = PROTOCOL_LIMITS[protocol]
  score = lambda r: r["score"] if isinstance(r, dict) else r.score
  return sorted(relations, key=lambda r: -score(r))[:limit]


def relation_to_json(rel, ndigits=2):
  """A `association.Relation` (or equal dict) -> official JSON entry.

  Boxes are rounded to `ndigits` decimals to keep files small; the official
  vIoU accepts float boxes.
  """
  if isinstance(rel, dict):
    return rel
  n = rel.end - rel.start
  if len(rel.sub_traj) != n or len(rel.obj_traj) != n:
    raise ValueError(
      f"relation {rel.triplet} [{rel.start}, {rel.end}) has "
      f"{len(rel.sub_traj)} subject / {len(rel.obj_traj)} "
      f"object boxes, expected {n}"
    )
  r = lambda t: np.round(np.asarray(t, np.float64), ndigits).tolist()
  return {
    "triplet": [str(x) for x in rel.triplet],
    "score": float(rel.score),
    "duration": [int(rel.start), int(rel.end)],
    "sub_traj": r(rel.sub_traj),
    "obj_traj": r(rel.obj_traj),
  }


def make_submission(results, external_data=None):
  """`{video_id: [Relation | dict]}` -> the official submission dict."""
  out = {
    "version": "VERSION 1.0",
    "results": {str(vid): [relation_to_json(r) for r in rels] for vid, rels in results.items()},
  }
  if external_data is not None:
    out["external_data"] = external_data
  return out


def write_json_atomic(obj, path):
  """Writes JSON (xz-compressed if `path` ends in .xz) via temp + rename."""
  path = os.fspath(path)
  data = json.dumps(obj, separators=(",", ":")).encode()
  io_util.write_bytes_atomic(path, lzma.compress(data) if path.endswith(".xz") else data)
  return path


def write_submission(results, path, external_data=None):
  """Writes `{video_id: [relations]}` as an official submission file."""
  return write_json_atomic(make_submission(results, external_data), path)
