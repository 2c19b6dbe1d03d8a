"""Every entry point against careless and hostile input: one table, one row per case.

Each row: the command (argv after the entry point), the exit status (2: unusable arguments or
input, 1: a submission refused after reading), words the `error:` line must contain, and the
checks every row gets: an `error: ...` line on stderr, no Python traceback anywhere, and no file
left behind (the fixture tree is listed before and after). Rows run in-process (each module's
`main(argv)`); the few in SUBPROCESS_ROWS run the real `python -m` path.
"""

from __future__ import annotations

import json
import lzma
import os
import subprocess
import sys

import numpy as np
import pytest

from relations import cli_errors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ----------------------------------------------------------------------------------- fixtures

_BOX = {"xmin": 0, "ymin": 0, "xmax": 9, "ymax": 9}


def _annotation(**changes):
  """A valid VidOR annotation file (2 frames, adult next_to dog), then `changes`."""
  ann = {
    "version": "VERSION 1.0",
    "video_id": "0000/1",
    "video_hash": "h",
    "frame_count": 2,
    "fps": 1,
    "width": 32,
    "height": 32,
    "subject/objects": [{"tid": 0, "category": "adult"}, {"tid": 1, "category": "dog"}],
    "trajectories": [
      [
        {"tid": 0, "bbox": _BOX, "generated": 0},
        {"tid": 1, "bbox": dict(_BOX, xmin=10, xmax=19), "generated": 0},
      ]
    ]
    * 2,
    "relation_instances": [
      {"subject_tid": 0, "object_tid": 1, "predicate": "next_to", "begin_fid": 0, "end_fid": 2}
    ],
  }
  ann.update(changes)
  return {k: v for k, v in ann.items() if v is not None}


def _pred(score=0.9, box=(0, 0, 9, 9)):
  return {
    "triplet": ["adult", "next_to", "dog"],
    "score": score,
    "duration": [0, 2],
    "sub_traj": [list(box)] * 2,
    "obj_traj": [[10, 0, 19, 9]] * 2,
  }


def _write(path, text, mode="w"):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, mode) as f:
    f.write(text)


def _occlusion_files(d):
  from relations.occlusion.data import realoob_io as io  # pylint: disable=g-import-not-at-top
  from relations.occlusion.metrics import synthetic  # pylint: disable=g-import-not-at-top

  rng = np.random.default_rng(0)
  gt_root, pred_root = os.path.join(d, "occ", "gt"), os.path.join(d, "occ", "pred")
  for i in range(2):
    gt = synthetic.make_scene(rng, 24, 32, num_shapes=3)
    prob, theta = synthetic.make_prediction(rng, gt)
    io.write_gt(gt_root, f"im{i}", gt["boundaries"], gt["orientation"], gt["valid"], gt["depth"])
    io.write_prediction(pred_root, f"im{i}", prob, theta)
    io.write_prediction(os.path.join(d, "occ", "pred_corrupt"), f"im{i}", prob, theta)
    good = gt["depth"].astype(np.float64)
    for name, bad in (
      ("nan", np.where(good > 0, np.nan, 0.0)),
      ("neg", -good),
      ("zero", np.zeros_like(good)),
      ("3d", good[None]),
      ("small", good[:10, :10]),
      ("text", np.array(["a", "b"])),
    ):
      os.makedirs(os.path.join(d, "depth", name), exist_ok=True)
      np.save(os.path.join(d, "depth", name, f"im{i}.npy"), bad if i == 0 else good)
    os.makedirs(os.path.join(d, "depth", "corrupt"), exist_ok=True)
    if i == 0:
      _write(os.path.join(d, "depth", "corrupt", "im0.npy"), b"\x93NUMPY garbage", "wb")
    else:
      np.save(os.path.join(d, "depth", "corrupt", "im1.npy"), good)
  io.write_split(gt_root, "test", ["im0", "im1"])
  _write(os.path.join(d, "occ", "pred_corrupt", "boundaries", "im0.png"), b"not a png", "wb")


def _vrd_files(d):
  v = os.path.join(d, "vrd")
  gt = {
    "0000/1": [
      {
        "triplet": ["adult", "next_to", "dog"],
        "subject_tid": 0,
        "object_tid": 1,
        "duration": [0, 2],
        "sub_traj": [[0, 0, 9, 9]] * 2,
        "obj_traj": [[10, 0, 19, 9]] * 2,
      }
    ]
  }
  _write(f"{v}/gt.json", json.dumps(gt))
  bad_cat = {"0000/1": [dict(gt["0000/1"][0], triplet=["martian", "next_to", "dog"])]}
  _write(f"{v}/gt_unknown_category.json", json.dumps(bad_cat))
  _write(f"{v}/ann_no_trajectories.json", json.dumps(_annotation(trajectories=None)))
  _write(
    f"{v}/ann_unknown_category/0000/1.json",
    json.dumps(
      _annotation(
        **{"subject/objects": [{"tid": 0, "category": "martian"}, {"tid": 1, "category": "dog"}]}
      )
    ),
  )
  sub = {"version": "VERSION 1.0", "results": {"0000/1": [_pred()]}}
  _write(f"{v}/sub.json", json.dumps(sub))
  _write(
    f"{v}/sub_nan_box.json",
    json.dumps(
      {"version": "VERSION 1.0", "results": {"0000/1": [_pred(box=(0, float("nan"), 9, 9))]}}
    ),
  )
  one = json.dumps([_pred()])
  _write(
    f"{v}/sub_dup_video.json",
    '{"version": "VERSION 1.0", "results": {"0000/1": ' + one + ', "0000/1": ' + one + "}}",
  )
  _write(f"{v}/sub_deep.json", "[" * 100000 + "]" * 100000)
  _write(f"{v}/sub_huge_int.json", '{"results": {"0000/1": [], "x": ' + "9" * 5000 + "}}")
  _write(f"{v}/sub_latin1.json", b'{"results": {"caf\xe9": []}}', "wb")
  _write(f"{v}/sub_bad.json", '{"results": {')
  _write(f"{v}/sub_list.json", "[1, 2, 3]")
  _write(f"{v}/sub_corrupt.json.xz", lzma.compress(b"{}")[:20], "wb")
  _write(
    f"{v}/sub_missing_field.json",
    json.dumps({"results": {"0000/1": [{k: x for k, x in _pred().items() if k != "score"}]}}),
  )


def _commonsense_files(d):
  c = os.path.join(d, "cs")
  annots = [
    {
      "event": "1 is at a party",
      "place": "party",
      "intent": ["talk to 2"],
      "before": ["walk in"],
      "after": ["leave"],
    }
  ]
  gens = [
    {"event_idx": 0, "inference_relation": r, "generations": ["talk to 2", "walk in"]}
    for r in ("intent", "before", "after")
  ]
  _write(f"{c}/val.json", json.dumps(annots))
  _write(f"{c}/gens.json", json.dumps(gens))
  _write(f"{c}/train.json", json.dumps([{"intent": ["talk to 2"]}]))
  _write(f"{c}/train_dict.json", json.dumps({"intent": ["talk"]}))
  _write(f"{c}/train_strings.json", json.dumps(["talk to 2", "walk in"]))
  _write(f"{c}/train_empty.json", "[]")
  _write(f"{c}/train_no_sentences.json", json.dumps([{"event": "x"}]))
  _write(f"{c}/val_dict.json", json.dumps({"0": annots[0]}))
  _write(f"{c}/val_bad_field.json", json.dumps([dict(annots[0], intent="talk")]))
  _write(f"{c}/gens_bad_relation.json", json.dumps([dict(gens[0], inference_relation="why")]))
  _write(f"{c}/gens_bad_index.json", json.dumps([dict(gens[0], event_idx=7)]))
  # Punctuation takes the captions off the pure-Python path: the PTB jar (Java) is needed.
  punct = [dict(g, generations=["talk to 2, then leave.", "walk in!"]) for g in gens]
  _write(f"{c}/gens_punct.json", json.dumps(punct))
  _write(f"{c}/latin1.json", b'[{"event": "caf\xe9"}]', "wb")
  _write(f"{c}/deep.json", "[" * 100000 + "]" * 100000)


def _train_files(d):
  _write(f"{d}/cfg/syntax.py", "def get_config(arg=None:\n  pass\n")
  _write(f"{d}/cfg/no_get_config.py", "X = 1\n")
  _write(f"{d}/cfg/latin1.py", b"# caf\xe9\n", "wb")
  os.makedirs(f"{d}/cfg/dir.py", exist_ok=True)
  _write(f"{d}/a_file", "x")
  os.makedirs(f"{d}/run_no_ckpt", exist_ok=True)
  os.makedirs(f"{d}/run_ckpt/checkpoints/10", exist_ok=True)
  os.makedirs(f"{d}/empty_manual", exist_ok=True)


@pytest.fixture(scope="module")
def d(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("hostile"))
  _occlusion_files(root)
  _vrd_files(root)
  _commonsense_files(root)
  _train_files(root)
  return root


# ----------------------------------------------------------------------------------- the table

OCC = "--gt {d}/occ/gt --pred {d}/occ/pred"
DEPTH = "--gt {d}/occ/gt --depth {d}/depth"
VRD = "--groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub.json"
CS = "--annotations {d}/cs/val.json --generations {d}/cs/gens.json --no-meteor"
TINY = "--config configs/occlusion.py:tiny --workdir {d}/new_run"
VR_TINY = "--config configs/video_relations.py:tiny --workdir {d}/new_run"

# (id, entry point, argv, exit status, words the error line contains, environment)
ROWS = [
  # ---- python -m relations.evaluate (the dispatcher)
  ("eval-no-verb", "evaluate", "", 2, ["say what to evaluate"], {}),
  ("eval-unknown-verb", "evaluate", "vidorr", 2, ["unknown evaluation 'vidorr'"], {}),
  # ---- evaluate occlusion
  ("occ-missing-gt-flag", "evaluate", "occlusion --pred {d}/occ/pred", 2, ["required", "--gt"], {}),
  (
    "occ-gt-missing",
    "evaluate",
    "occlusion --gt {d}/nope --pred {d}/occ/pred",
    2,
    ["--gt", "nope", "no such directory"],
    {},
  ),
  (
    "occ-gt-is-file",
    "evaluate",
    "occlusion --gt {d}/a_file --pred {d}/occ/pred",
    2,
    ["a_file", "expected a directory"],
    {},
  ),
  (
    "occ-pred-missing",
    "evaluate",
    "occlusion --gt {d}/occ/gt --pred {d}/nope",
    2,
    ["--pred", "no such directory"],
    {},
  ),
  (
    "occ-pred-is-file",
    "evaluate",
    "occlusion --gt {d}/occ/gt --pred {d}/a_file",
    2,
    ["--pred", "expected a directory"],
    {},
  ),
  (
    "occ-border-negative",
    "evaluate",
    f"occlusion {OCC} --border -1",
    2,
    ["--border", "integer in [0, 10000]", "-1"],
    {},
  ),
  (
    "occ-border-huge",
    "evaluate",
    f"occlusion {OCC} --border 1000000000",
    2,
    ["--border", "1000000000"],
    {},
  ),
  (
    "occ-border-bigger-than-image",
    "evaluate",
    f"occlusion {OCC} --border 50",
    2,
    ["50-pixel border", "24x32", "--border <= 11"],
    {},
  ),
  ("occ-border-not-int", "evaluate", f"occlusion {OCC} --border two", 2, ["--border", "'two'"], {}),
  (
    "occ-maxdist-zero",
    "evaluate",
    f"occlusion {OCC} --max-dist 0",
    2,
    ["--max-dist", "finite number in (0, 1]"],
    {},
  ),
  (
    "occ-maxdist-negative",
    "evaluate",
    f"occlusion {OCC} --max-dist -0.1",
    2,
    ["--max-dist", "-0.1"],
    {},
  ),
  (
    "occ-maxdist-nan",
    "evaluate",
    f"occlusion {OCC} --max-dist nan",
    2,
    ["--max-dist", "finite"],
    {},
  ),
  (
    "occ-maxdist-inf",
    "evaluate",
    f"occlusion {OCC} --max-dist inf",
    2,
    ["--max-dist", "finite"],
    {},
  ),
  (
    "occ-nthresh-zero",
    "evaluate",
    f"occlusion {OCC} --nthresh 0",
    2,
    ["--nthresh", "integer in [1, 10000]"],
    {},
  ),
  ("occ-workers-negative", "evaluate", f"occlusion {OCC} --workers -3", 2, ["--workers", "-3"], {}),
  (
    "occ-gt-format-unknown",
    "evaluate",
    f"occlusion {OCC} --gt-format xml",
    2,
    ["--gt-format", "invalid choice"],
    {},
  ),
  (
    "occ-protocol-unknown",
    "evaluate",
    f"occlusion {OCC} --protocol bsds",
    2,
    ["--protocol", "invalid choice"],
    {},
  ),
  ("occ-split-unknown", "evaluate", f"occlusion {OCC} --split val", 2, ["val"], {}),
  (
    "occ-output-is-dir",
    "evaluate",
    f"occlusion {OCC} --output {{d}}/occ",
    2,
    ["--output", "is a directory"],
    {},
  ),
  (
    "occ-output-under-file",
    "evaluate",
    f"occlusion {OCC} --output {{d}}/a_file/m.json",
    2,
    ["--output", "a_file is a file"],
    {},
  ),
  (
    "occ-plot-is-dir",
    "evaluate",
    f"occlusion {OCC} --plot {{d}}/occ",
    2,
    ["--plot", "is a directory"],
    {},
  ),
  (
    "occ-pred-corrupt-png",
    "evaluate",
    "occlusion --gt {d}/occ/gt --pred {d}/occ/pred_corrupt",
    2,
    ["im0"],
    {},
  ),
  (
    "occ-unknown-flag",
    "evaluate",
    f"occlusion {OCC} --bordr 2",
    2,
    ["unrecognized arguments", "--bordr"],
    {},
  ),
  # ---- evaluate depth
  (
    "depth-protocol-unknown",
    "evaluate",
    f"depth {DEPTH}/nan --protocols i,bogus",
    2,
    ["--protocols", "'bogus'", "i, ii, iii, iv, v"],
    {},
  ),
  (
    "depth-protocols-empty",
    "evaluate",
    f"depth {DEPTH}/nan --protocols ''",
    2,
    ["--protocols", "comma-separated"],
    {},
  ),
  (
    "depth-protocols-twice",
    "evaluate",
    f"depth {DEPTH}/nan --protocols v,v",
    2,
    ["'v' given twice"],
    {},
  ),
  (
    "depth-dir-missing",
    "evaluate",
    "depth --gt {d}/occ/gt --depth {d}/nope",
    2,
    ["--depth", "no such directory"],
    {},
  ),
  (
    "depth-gt-missing",
    "evaluate",
    "depth --gt {d}/nope --depth {d}/depth/nan",
    2,
    ["--gt", "no such directory"],
    {},
  ),
  ("depth-nan", "evaluate", f"depth {DEPTH}/nan", 2, ["nan/im0.npy", "non-finite depth"], {}),
  ("depth-negative", "evaluate", f"depth {DEPTH}/neg", 2, ["neg/im0.npy", "negative depth"], {}),
  (
    "depth-all-zero",
    "evaluate",
    f"depth {DEPTH}/zero",
    2,
    ["zero/im0.npy", "every pixel is 0"],
    {},
  ),
  ("depth-3d", "evaluate", f"depth {DEPTH}/3d", 2, ["3d/im0.npy", "2-D"], {}),
  (
    "depth-wrong-size",
    "evaluate",
    f"depth {DEPTH}/small",
    2,
    ["small/im0.npy", "shape (10, 10)"],
    {},
  ),
  (
    "depth-text-array",
    "evaluate",
    f"depth {DEPTH}/text",
    2,
    ["text/im0.npy", "must be numbers"],
    {},
  ),
  (
    "depth-corrupt-npy",
    "evaluate",
    f"depth {DEPTH}/corrupt",
    2,
    ["corrupt/im0.npy", "not a readable .npy"],
    {},
  ),
  (
    "depth-missing-files",
    "evaluate",
    "depth --gt {d}/occ/gt --depth {d}/occ",
    2,
    ["2 problem(s)", "im0: missing"],
    {},
  ),
  (
    "depth-output-is-dir",
    "evaluate",
    f"depth {DEPTH}/nan --output {{d}}/depth",
    2,
    ["--output", "is a directory"],
    {},
  ),
  # ---- evaluate video_relations (vidor / vidvrd)
  (
    "vrd-gt-missing",
    "evaluate",
    "vidor --groundtruth {d}/nope --prediction {d}/vrd/sub.json",
    2,
    ["--groundtruth", "no such file or directory"],
    {},
  ),
  (
    "vrd-pred-missing",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/x.json",
    2,
    ["--prediction", "no such file"],
    {},
  ),
  (
    "vrd-pred-is-dir",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd",
    2,
    ["--prediction", "is a directory"],
    {},
  ),
  (
    "vrd-pred-malformed",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_bad.json",
    2,
    ["sub_bad.json", "malformed JSON"],
    {},
  ),
  (
    "vrd-pred-not-utf8",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_latin1.json",
    2,
    ["sub_latin1.json", "decode"],
    {},
  ),
  (
    "vrd-pred-deeply-nested",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_deep.json",
    2,
    ["sub_deep.json", "nested too deeply"],
    {},
  ),
  (
    "vrd-pred-huge-number",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_huge_int.json",
    2,
    ["sub_huge_int.json", "unreadable JSON value"],
    {},
  ),
  (
    "vrd-pred-corrupt-xz",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_corrupt.json.xz",
    2,
    ["sub_corrupt.json.xz", "decompress"],
    {},
  ),
  (
    "vrd-pred-duplicate-video",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_dup_video.json",
    2,
    ["sub_dup_video.json", "video '0000/1' appears more than once"],
    {},
  ),
  (
    "vrd-validate-duplicate-video",
    "validate",
    "{d}/vrd/sub_dup_video.json",
    2,
    ["sub_dup_video.json", "video '0000/1' appears more than once"],
    {},
  ),
  (
    "vrd-validate-malformed",
    "validate",
    "{d}/vrd/sub_deep.json --groundtruth {d}/vrd/gt.json",
    2,
    ["sub_deep.json", "nested too deeply"],
    {},
  ),
  (
    "vrd-pred-nan-box",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_nan_box.json",
    1,
    ["non-finite coordinates", "sub_nan_box.json", "not scored"],
    {},
  ),
  (
    "vrd-pred-not-object",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_list.json",
    1,
    ["expected a JSON object", "not scored"],
    {},
  ),
  (
    "vrd-pred-missing-score",
    "evaluate",
    "vidor --groundtruth {d}/vrd/gt.json --prediction {d}/vrd/sub_missing_field.json",
    1,
    ["field 'score': missing", "not scored"],
    {},
  ),
  (
    "vrd-gt-missing-trajectories",
    "evaluate",
    "vidor --groundtruth {d}/vrd/ann_no_trajectories.json --prediction {d}/vrd/sub.json",
    2,
    ["ann_no_trajectories.json", "missing field 'trajectories'"],
    {},
  ),
  (
    "vrd-gt-unknown-category",
    "evaluate",
    (
      "vidor --groundtruth {d}/vrd/gt_unknown_category.json --prediction {d}/vrd/sub.json "
      "--dataset vidor"
    ),
    2,
    ["'martian' is not a known vidor subject category"],
    {},
  ),
  (
    "vrd-gt-folder-unknown-category",
    "evaluate",
    (
      "vidor --groundtruth {d}/vrd/ann_unknown_category --prediction {d}/vrd/sub.json "
      "--dataset vidor"
    ),
    2,
    ["1.json", "'martian' is not a known category"],
    {},
  ),
  (
    "vrd-gt-malformed",
    "evaluate",
    "vidor --groundtruth {d}/vrd/sub_bad.json --prediction {d}/vrd/sub.json",
    2,
    ["sub_bad.json", "malformed JSON"],
    {},
  ),
  (
    "vrd-gt-deeply-nested",
    "evaluate",
    "vidor --groundtruth {d}/vrd/sub_deep.json --prediction {d}/vrd/sub.json",
    2,
    ["sub_deep.json", "nested too deeply"],
    {},
  ),
  (
    "vrd-gt-huge-number",
    "evaluate",
    "vidor --groundtruth {d}/vrd/sub_huge_int.json --prediction {d}/vrd/sub.json",
    2,
    ["sub_huge_int.json", "unreadable JSON value"],
    {},
  ),
  (
    "vrd-gt-empty-folder",
    "evaluate",
    "vidor --groundtruth {d}/empty_manual --prediction {d}/vrd/sub.json",
    2,
    ["empty_manual", "no annotation files"],
    {},
  ),
  (
    "vrd-zero-shot-missing",
    "evaluate",
    f"vidor {VRD} --zero-shot {{d}}/nope",
    2,
    ["--zero-shot", "no such file or directory"],
    {},
  ),
  (
    "vrd-dataset-unknown",
    "evaluate",
    f"vidor {VRD} --dataset imagenet",
    2,
    ["--dataset", "invalid choice"],
    {},
  ),
  (
    "vrd-protocol-unknown",
    "evaluate",
    f"vidor {VRD} --protocol vru19",
    2,
    ["--protocol", "invalid choice"],
    {},
  ),
  (
    "vrd-output-is-dir",
    "evaluate",
    f"vidor {VRD} --output {{d}}/vrd",
    2,
    ["--output", "is a directory"],
    {},
  ),
  (
    "vrd-output-under-file",
    "evaluate",
    f"vidor {VRD} --output {{d}}/a_file/x.json",
    2,
    ["--output", "a_file is a file"],
    {},
  ),
  # ---- evaluate commonsense
  (
    "cs-annotations-missing",
    "evaluate",
    "commonsense --annotations {d}/nope.json --generations {d}/cs/gens.json",
    2,
    ["--annotations", "no such file"],
    {},
  ),
  (
    "cs-annotations-is-dir",
    "evaluate",
    "commonsense --annotations {d}/cs --generations {d}/cs/gens.json",
    2,
    ["--annotations", "is a directory"],
    {},
  ),
  (
    "cs-annotations-not-utf8",
    "evaluate",
    "commonsense --annotations {d}/cs/latin1.json --generations {d}/cs/gens.json",
    2,
    ["latin1.json", "not UTF-8"],
    {},
  ),
  (
    "cs-annotations-deep",
    "evaluate",
    "commonsense --annotations {d}/cs/deep.json --generations {d}/cs/gens.json",
    2,
    ["deep.json", "nested too deeply"],
    {},
  ),
  (
    "cs-generations-huge-number",
    "evaluate",
    "commonsense --annotations {d}/cs/val.json --generations {d}/vrd/sub_huge_int.json",
    2,
    ["sub_huge_int.json", "unreadable JSON value"],
    {},
  ),
  (
    "cs-annotations-dict",
    "evaluate",
    "commonsense --annotations {d}/cs/val_dict.json --generations {d}/cs/gens.json",
    2,
    ["val_dict.json", "expected a JSON list of event records"],
    {},
  ),
  (
    "cs-annotations-field-not-list",
    "evaluate",
    "commonsense --annotations {d}/cs/val_bad_field.json --generations {d}/cs/gens.json",
    2,
    ["val_bad_field.json: record 0: intent: expected a list of strings"],
    {},
  ),
  (
    "cs-generations-bad-relation",
    "evaluate",
    "commonsense --annotations {d}/cs/val.json --generations {d}/cs/gens_bad_relation.json",
    2,
    ["gens_bad_relation.json: record 0", "inference_relation"],
    {},
  ),
  (
    "cs-generations-bad-index",
    "evaluate",
    "commonsense --annotations {d}/cs/val.json --generations {d}/cs/gens_bad_index.json",
    2,
    ["gens_bad_index.json: record 0", "event_idx"],
    {},
  ),
  (
    "cs-train-dict",
    "evaluate",
    f"commonsense {CS} --train-annotations {{d}}/cs/train_dict.json",
    2,
    ["train_dict.json", "expected a JSON list", "got a JSON object"],
    {},
  ),
  (
    "cs-train-strings",
    "evaluate",
    f"commonsense {CS} --train-annotations {{d}}/cs/train_strings.json",
    2,
    ["train_strings.json: record 0", "expected an event record"],
    {},
  ),
  (
    "cs-train-empty",
    "evaluate",
    f"commonsense {CS} --train-annotations {{d}}/cs/train_empty.json",
    2,
    ["train_empty.json", "empty list"],
    {},
  ),
  (
    "cs-train-no-sentences",
    "evaluate",
    f"commonsense {CS} --train-annotations {{d}}/cs/train_no_sentences.json",
    2,
    ["train_no_sentences.json", "no intent / before / after sentence"],
    {},
  ),
  (
    "cs-meteor-workers-zero",
    "evaluate",
    f"commonsense {CS} --meteor-workers 0",
    2,
    ["--meteor-workers", "integer in [1, 256]"],
    {},
  ),
  (
    "cs-output-is-dir",
    "evaluate",
    f"commonsense {CS} --output {{d}}/cs",
    2,
    ["--output", "is a directory"],
    {},
  ),
  (
    "cs-no-java",
    "evaluate",
    ("commonsense --annotations {d}/cs/val.json --generations {d}/cs/gens_punct.json --no-meteor"),
    2,
    ["needs Java", "apt-get install openjdk", "--no-meteor skips only METEOR"],
    {"PATH": "/nonexistent"},
  ),
  # ---- python -m relations.train
  ("train-no-config", "train", "--workdir {d}/new_run", 2, ["required", "--config"], {}),
  (
    "train-config-missing",
    "train",
    "--config configs/nope.py:tiny --workdir {d}/new_run",
    2,
    ["configs/nope.py", "no such config file"],
    {},
  ),
  (
    "train-config-is-dir",
    "train",
    "--config {d}/cfg/dir.py --workdir {d}/new_run",
    2,
    ["dir.py", "is a directory"],
    {},
  ),
  (
    "train-config-syntax",
    "train",
    "--config {d}/cfg/syntax.py --workdir {d}/new_run",
    2,
    ["syntax.py", "line 1", "syntax error"],
    {},
  ),
  (
    "train-config-no-get-config",
    "train",
    "--config {d}/cfg/no_get_config.py --workdir {d}/new_run",
    2,
    ["no_get_config.py", "get_config"],
    {},
  ),
  (
    "train-config-not-utf8",
    "train",
    "--config {d}/cfg/latin1.py --workdir {d}/new_run",
    2,
    ["latin1.py"],
    {},
  ),
  (
    "train-variant-typo",
    "train",
    "--config configs/occlusion.py:tny --workdir {d}/new_run",
    2,
    ["configs/occlusion.py:tny", "'tny'", "did you mean 'tiny'"],
    {},
  ),
  (
    "train-variant-unknown",
    "train",
    "--config configs/occlusion.py:variant=Q/16 --workdir {d}/new_run",
    2,
    ["Unknown ViT variant 'Q/16'"],
    {},
  ),
  (
    "train-arg-unknown-key",
    "train",
    "--config configs/video_relations.py:tiny,speed=3 --workdir {d}/new_run",
    2,
    ["'speed'", "known keys"],
    {},
  ),
  (
    "train-arg-wrong-type",
    "train",
    "--config configs/video_relations.py:tiny=maybe --workdir {d}/new_run",
    2,
    ["'tiny' expects a bool"],
    {},
  ),
  (
    "train-cs-variant-unknown",
    "train",
    "--config configs/commonsense.py:huge --workdir {d}/new_run",
    2,
    ["variant", "'huge'"],
    {},
  ),
  (
    "train-override-typo",
    "train",
    f"{TINY} --config.total_stepz=5",
    2,
    ["Unknown config field 'total_stepz'"],
    {},
  ),
  (
    "train-override-not-literal",
    "train",
    f"{TINY} --config.total_steps=ten",
    2,
    ["total_steps", "not a Python literal"],
    {},
  ),
  (
    "train-override-wrong-type",
    "train",
    f"{TINY} --config.total_steps=1.5",
    2,
    ["total_steps", "cannot set"],
    {},
  ),
  (
    "train-batch-negative",
    "train",
    f"{TINY} --config.input.batch_size=-8",
    2,
    ["input.batch_size", "positive integer", "-8"],
    {},
  ),
  (
    "train-steps-zero",
    "train",
    f"{TINY} --config.total_steps=0",
    2,
    ["total_steps", "positive integer"],
    {},
  ),
  (
    "train-log-every-zero",
    "train",
    f"{TINY} --config.log_every=0",
    2,
    ["log_every", "positive integer"],
    {},
  ),
  (
    "train-lr-nan",
    "train",
    f"{TINY} --config.schedule.lr=nan",
    2,
    ["schedule.lr", "not a Python literal"],
    {},
  ),
  ("train-lr-inf", "train", f"{TINY} --config.schedule.lr=1e999", 2, ["schedule.lr", "finite"], {}),
  (
    "train-lr-negative",
    "train",
    f"{TINY} --config.schedule.lr=-0.1",
    2,
    ["schedule.lr", ">= 0"],
    {},
  ),
  (
    "train-accum-indivisible",
    "train",
    f"{TINY} --config.grad_accum_steps=3",
    2,
    ["input.batch_size", "not divisible", "grad_accum_steps=3"],
    {},
  ),
  (
    "train-override-no-value",
    "train",
    f"{TINY} --config.total_steps",
    2,
    ["--config.total_steps needs a value"],
    {},
  ),
  ("train-unknown-flag", "train", f"{TINY} --steps 5", 2, ["unrecognized arguments"], {}),
  (
    "train-manual-dir-missing",
    "train",
    f"{TINY} --config.data.manual_dir={{d}}/nope",
    2,
    ["data.manual_dir", "nope: no such directory", "MANUAL_DOWNLOAD_INSTRUCTIONS"],
    {},
  ),
  (
    "train-dataset-unknown",
    "train",
    "--config configs/occlusion.py:tiny,dataset=nyud --workdir {d}/new_run",
    2,
    ["'dataset'", "'nyud'"],
    {},
  ),
  (
    "train-workdir-is-file",
    "train",
    "--config configs/occlusion.py:tiny --workdir {d}/a_file",
    2,
    ["a_file", "is a file; expected a directory"],
    {},
  ),
  (
    "train-workdir-under-file",
    "train",
    "--config configs/occlusion.py:tiny --workdir {d}/a_file/run",
    2,
    ["a_file is a file"],
    {},
  ),
  # ---- python -m relations.predict
  (
    "predict-no-checkpoint",
    "predict",
    "--config configs/occlusion.py:tiny --workdir {d}/run_no_ckpt",
    2,
    ["run_no_ckpt/checkpoints", "no checkpoint here", "train first"],
    {},
  ),
  (
    "predict-workdir-missing",
    "predict",
    "--config configs/occlusion.py:tiny --workdir {d}/nope",
    2,
    ["nope", "no such training workdir"],
    {},
  ),
  (
    "predict-step-missing",
    "predict",
    "--config configs/occlusion.py:tiny --workdir {d}/run_ckpt --step 5",
    2,
    ["no checkpoint for step 5", "there are 10"],
    {},
  ),
  (
    "predict-step-negative",
    "predict",
    "--config configs/occlusion.py:tiny --workdir {d}/run_ckpt --step -1",
    2,
    ["--step", "integer >= 0"],
    {},
  ),
  (
    "predict-eval-unknown",
    "predict",
    "--config configs/occlusion.py:tiny --workdir {d}/run_ckpt --eval tset",
    2,
    ["unknown evaluator(s) 'tset'", "test"],
    {},
  ),
  (
    "predict-config-typo",
    "predict",
    "--config configs/occlusion.py:tiny --workdir {d}/run_ckpt --config.evals.tset.x=1",
    2,
    ["Unknown config field 'evals.tset'"],
    {},
  ),
  # ---- python -m relations.datasets.prepare
  (
    "prepare-unknown-dataset",
    "prepare",
    "vidoor --manual_dir {d}/empty_manual --data_dir {d}/tfds",
    2,
    ["unknown dataset 'vidoor'", "vidor"],
    {},
  ),
  (
    "prepare-manual-dir-missing",
    "prepare",
    "vidor --manual_dir {d}/nope --data_dir {d}/tfds",
    2,
    ["--manual_dir", "no such directory"],
    {},
  ),
  (
    "prepare-manual-dir-is-file",
    "prepare",
    "vidor --manual_dir {d}/a_file --data_dir {d}/tfds",
    2,
    ["--manual_dir", "expected a directory"],
    {},
  ),
  (
    "prepare-no-data-dir",
    "prepare",
    "vidor --manual_dir {d}/empty_manual",
    2,
    ["--data_dir is required"],
    {},
  ),
  (
    "prepare-data-dir-is-file",
    "prepare",
    "occlusion_boundaries/realoob --manual_dir {d}/empty_manual --data_dir {d}/a_file",
    2,
    ["a_file", "is a file; expected a directory"],
    {},
  ),
  (
    "prepare-file-format",
    "prepare",
    "vidor --manual_dir {d}/empty_manual --data_dir {d}/tfds --file_format csv",
    2,
    ["--file_format", "invalid choice"],
    {},
  ),
  (
    "prepare-unknown-config",
    "prepare",
    "occlusion_boundaries/realoobb --manual_dir {d}/empty_manual --data_dir {d}/tfds",
    2,
    ["unknown config 'realoobb'", "realoob"],
    {},
  ),
  # ---- python -m relations.demo
  (
    "demo-unknown-task",
    "demo",
    "--workdir {d}/demo --tasks occlusion,vidor",
    2,
    ["--tasks", "'vidor'", "video_relations"],
    {},
  ),
  ("demo-empty-tasks", "demo", "--workdir {d}/demo --tasks ,", 2, ["--tasks"], {}),
  (
    "demo-workdir-is-file",
    "demo",
    "--workdir {d}/a_file --tasks occlusion",
    2,
    ["a_file", "is a file"],
    {},
  ),
]

# Rows also run through the real `python -m ...` path (a fresh interpreter each).
SUBPROCESS_ROWS = (
  "eval-unknown-verb",
  "occ-border-negative",
  "train-variant-typo",
  "predict-no-checkpoint",
  "prepare-unknown-dataset",
  "demo-unknown-task",
)

_MODULES = {
  "evaluate": "relations.evaluate",
  "train": "relations.train",
  "predict": "relations.predict",
  "prepare": "relations.datasets.prepare",
  "demo": "relations.demo",
  "validate": "relations.video_relations.metrics.validate",
}


def _main(entry):
  import importlib  # pylint: disable=g-import-not-at-top

  name = _MODULES[entry] + (".__main__" if entry == "train" else "")
  return importlib.import_module(name).main


def _argv(template, d):
  import shlex  # pylint: disable=g-import-not-at-top

  return shlex.split(template.format(d=d))


def _listing(d):
  return sorted(
    os.path.relpath(os.path.join(r, f), d)
    for r, dirs, files in os.walk(d)
    for f in files + [x + "/" for x in dirs]
  )


def _check(status, out, err, want_status, words, row_id):
  text = out + err
  assert "Traceback" not in text, f"{row_id}: traceback:\n{text}"
  assert status == want_status, f"{row_id}: exit {status}, want {want_status}:\n{text}"
  lines = err.splitlines()
  first = next((i for i, x in enumerate(lines) if x.startswith("error: ")), None)
  assert first is not None, f"{row_id}: no 'error: ' line on stderr:\n{err}"
  # The error line, plus the indented list that follows it when several problems are named.
  message = "\n".join(lines[first:])
  for w in words:
    assert w in message, f"{row_id}: {w!r} not in the error message:\n{message}"


def test_table_size_and_coverage():
  assert len(ROWS) >= 80
  assert len({r[0] for r in ROWS}) == len(ROWS)
  assert {r[1] for r in ROWS} == set(_MODULES)


# Rows among the suite's slowest tests (#38's durations listing), run in the slow tier.
SLOW_ROWS = ("vrd-pred-malformed",)


@pytest.mark.parametrize(
  "row",
  [pytest.param(r, marks=pytest.mark.slow) if r[0] in SLOW_ROWS else r for r in ROWS],
  ids=[r[0] for r in ROWS],
)
def test_hostile_input(row, d, capsys, monkeypatch):
  row_id, entry, template, want, words, env = row
  monkeypatch.chdir(REPO)
  for k, v in env.items():
    monkeypatch.setenv(k, v)
  monkeypatch.delenv(cli_errors.DEBUG_ENV, raising=False)
  before = _listing(d)
  status = _main(entry)(_argv(template, d))
  cap = capsys.readouterr()
  _check(status, cap.out, cap.err, want, words, row_id)
  assert _listing(d) == before, f"{row_id}: files left behind"


@pytest.mark.parametrize("row_id", SUBPROCESS_ROWS)
def test_hostile_input_python_m(row_id, d):
  row = next(r for r in ROWS if r[0] == row_id)
  _, entry, template, want, words, env = row
  before = _listing(d)
  env = {**os.environ, "PYTHONPATH": REPO, **env}
  env.pop(cli_errors.DEBUG_ENV, None)
  proc = subprocess.run(
    [sys.executable, "-m", _MODULES[entry], *_argv(template, d)],
    cwd=REPO,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  _check(proc.returncode, proc.stdout, proc.stderr, want, words, row_id)
  assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
  assert _listing(d) == before


def test_debug_shows_the_traceback(d):
  """`RELATIONS_DEBUG=1` (or --debug) keeps the traceback for bug reports."""
  env = {**os.environ, "PYTHONPATH": REPO, cli_errors.DEBUG_ENV: "1"}
  proc = subprocess.run(
    [
      sys.executable,
      "-m",
      "relations.train",
      "--config",
      "configs/occlusion.py:tny",
      "--workdir",
      f"{d}/new_run",
    ],
    cwd=REPO,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
    check=False,
  )
  assert proc.returncode == 1 and "Traceback" in proc.stderr
  assert "did you mean 'tiny'" in proc.stderr and not os.path.exists(f"{d}/new_run")
  with pytest.raises(cli_errors.InputError, match="unknown evaluation"):
    _main("evaluate")(["nope", "--debug"])


def test_strict_json_nan_becomes_null_with_warning(tmp_path, capsys):
  from relations import io_util  # pylint: disable=g-import-not-at-top

  path = str(tmp_path / "m.json")
  io_util.write_json_atomic(
    path,
    {
      "mAP": float("nan"),
      "zs": {"R@50": np.float32("inf")},
      "ok": np.float64(0.5),
      "curve": [1.0, float("-inf")],
    },
  )
  with open(path) as f:
    text = f.read()
  assert "NaN" not in text and "Infinity" not in text
  assert json.loads(text) == {"mAP": None, "zs": {"R@50": None}, "ok": 0.5, "curve": [1.0, None]}
  err = capsys.readouterr().err.splitlines()
  assert err == [
    f"warning: {path}: mAP = nan is not a JSON number; written as null",
    f"warning: {path}: zs/R@50 = inf is not a JSON number; written as null",
    f"warning: {path}: curve/1 = -inf is not a JSON number; written as null",
  ]
  assert os.listdir(tmp_path) == ["m.json"]


def test_library_errors_are_internal_errors(capsys):
  """A ValueError from deep inside a library is a bug to report: exit 1 and a --debug hint."""

  @cli_errors.entry_point
  def main(argv):
    del argv
    np.zeros(3).reshape(2)

  assert main([]) == 1
  err = capsys.readouterr().err
  assert err.startswith("error: internal error: ValueError: cannot reshape array of size 3")
  assert "rerun with --debug or RELATIONS_DEBUG=1" in err and len(err.splitlines()) == 1
