"""TFDS builder for oriented occlusion boundaries: RealOOB layout, PIOD, BSDS.

One dataset, three builder configs, so cross-dataset training and evaluation
are config changes.  Every config yields the same features in the project's
internal convention (see `relations.occlusion.data.formats`):

  id           Text
  image        Image [H, W, 3] uint8 (the original PNG/JPEG bytes)
  boundaries   bool    [A, H, W]  one map per annotator (A = 1 except BSDS)
  orientation  float32 [A, H, W]  radians in (-pi, pi], left-hand rule,
                                  image frame x right / y down; 0 off-boundary
  valid        bool    [A, H, W]  orientation usable (subset of boundaries)
  depth        float32 [H, W]     metres, 0 = missing (RealOOB layout only)
  hard_negative bool              training image without any OB
  ob/annotators, ob/height, ob/width   int32: A, H, W
  ob/index     int32   [P]        the same labels, sparse: flat index y * W + x
  ob/annotator int32   [P]          of every OB pixel of every annotator (sorted
  ob/orientation float32 [P]        by annotator, then index), its angle and
  ob/valid     bool    [P]          validity; what training reads (a few
                                    hundred KB less to inflate per image,
                                    `relations.occlusion.task.TrainSource`)

Data is read from `manual_dir/<config name>/` or, if that folder does not
exist, from `manual_dir` itself (see MANUAL_DOWNLOAD_INSTRUCTIONS).
"""

import os

from etils import epath
import numpy as np
import tensorflow_datasets as tfds

from relations import tfds_util
from relations.occlusion.data import formats as occlusion_formats
from relations.occlusion.data import preprocess as occlusion_pp
from relations.occlusion.data import realoob_io

_ZLIB = tfds.features.Encoding.ZLIB


def sparse_labels(boundaries, orientation, valid):
  """Dense [A, H, W] labels -> the `ob/*` features (module docstring)."""
  a, h, w = np.shape(boundaries)
  ann, flat = np.nonzero(np.asarray(boundaries).reshape(a, -1))
  return {
    "annotators": a,
    "height": h,
    "width": w,
    "index": flat.astype(np.int32),
    "annotator": ann.astype(np.int32),
    "orientation": np.asarray(orientation, np.float32).reshape(len(boundaries), -1)[ann, flat],
    "valid": np.asarray(valid, bool).reshape(len(boundaries), -1)[ann, flat],
  }


class Builder(tfds_util.BeamOrGenerator, tfds.core.GeneratorBasedBuilder):
  """Oriented occlusion boundaries (RealOOB layout, PIOD, BSDS ownership)."""

  VERSION = tfds.core.Version("1.1.0")
  RELEASE_NOTES = {
    "1.0.0": "Initial release.",
    "1.1.0": "Sparse OB pixels (ob/*) for cheap training reads.",
  }
  BUILDER_CONFIGS = [
    tfds.core.BuilderConfig(
      name="realoob",
      description="The project's RealOOB layout; also what "
      "relations.occlusion.data.synthetic writes.",
    ),
    tfds.core.BuilderConfig(name="piod", description="PASCAL Instance Occlusion Dataset."),
    tfds.core.BuilderConfig(
      name="bsds_ownership", description="BSDS figure/ground ownership (several annotators)."
    ),
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Place each dataset under `<manual_dir>/<config>/` (or directly in
  `<manual_dir>` when building a single config):

  realoob/                      (the project's RealOOB layout)
    images/<id>.{png,jpg}
    boundaries/<id>.png         uint8, 255 = OB pixel
    orientation/<id>.png        uint16 v, theta = v / 65535 * 2*pi - pi
    valid/<id>.png              uint8, 255 = valid orientation
    depth/<id>.png              optional, uint16 millimetres, 0 = missing
    splits/train.txt, splits/test.txt
    hard_negatives/<id>.{png,jpg}   optional, training images without OBs

  piod/                         (PIOD annotations + PASCAL VOC 2010 images)
    Data/<id>.mat               bndinfo_pascal
    JPEGImages/<id>.jpg
    val_doc_2010.txt            test ids; every other Data/<id>.mat is train

  bsds_ownership/               (BSDS_theta + BSDS300 images)
    trainfg/<id>.mat            gtStruct.gt_theta
    testfg/<id>.mat
    BSDS300/images/train/<id>.jpg
  """

  def _info(self):
    ann = lambda dtype: tfds.features.Tensor(  # pylint: disable=g-long-lambda
      shape=(None, None, None), dtype=dtype, encoding=_ZLIB
    )
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(
        {
          "id": tfds.features.Text(),
          "image": tfds.features.Image(shape=(None, None, 3)),
          "boundaries": ann(np.bool_),
          "orientation": ann(np.float32),
          "valid": ann(np.bool_),
          "depth": tfds.features.Tensor(shape=(None, None), dtype=np.float32, encoding=_ZLIB),
          "hard_negative": tfds.features.Scalar(dtype=np.bool_),
          "ob": tfds.features.FeaturesDict(
            {
              "annotators": tfds.features.Scalar(dtype=np.int32),
              "height": tfds.features.Scalar(dtype=np.int32),
              "width": tfds.features.Scalar(dtype=np.int32),
              "index": tfds.features.Tensor(shape=(None,), dtype=np.int32, encoding=_ZLIB),
              "annotator": tfds.features.Tensor(shape=(None,), dtype=np.int32, encoding=_ZLIB),
              "orientation": tfds.features.Tensor(shape=(None,), dtype=np.float32, encoding=_ZLIB),
              "valid": tfds.features.Tensor(shape=(None,), dtype=np.bool_, encoding=_ZLIB),
            }
          ),
        }
      ),
      homepage="https://github.com/GuoxiaWang/DOOBNet",
    )

  def describe_prepared(self, manual_dir):
    """Lines `relations.datasets.prepare` prints after a build: the training pool.

    Hard negatives (realoob `hard_negatives/`) are in the train split; with
    `data.offline_16x` the other training images are augmented 16x and the
    hard negatives are not (RealOOB: 390 x 16 + 248 = 6,488, 3.8 %).
    """
    sub = os.path.join(os.fspath(manual_dir), self.builder_config.name)
    root = sub if epath.Path(sub).is_dir() else os.fspath(manual_dir)
    n_hn = len(_hard_negative_paths(root)) if self.builder_config.name == "realoob" else 0
    n_train = self.info.splits["train"].num_examples
    _, share, text = occlusion_pp.pool_summary(n_train - n_hn, n_hn)
    plain = n_hn / n_train if n_train else 0.0
    return [
      f"train split: {n_train} examples, {n_hn} hard negatives ({100 * plain:.1f} %)",
      f"{text} with data.offline_16x",
    ]

  def _root(self, dl_manager):
    manual = os.fspath(dl_manager.manual_dir)
    sub = os.path.join(manual, self.builder_config.name)
    return sub if epath.Path(sub).is_dir() else manual

  def _split_generators(self, dl_manager):
    root = self._root(dl_manager)
    return {split: self._generate_examples(root, split) for split in ("train", "test")}

  def _generate_examples(self, root, split):
    """(id, example) of `split` from the config's on-disk format.

    A generator, or a Beam PTransform when built with Beam options (`tfds_util.BeamOrGenerator`);
    the inputs are listed here, each image is read by a module-level function.
    """
    name = self.builder_config.name
    if name == "realoob":
      items = [("realoob", root, image_id) for image_id in realoob_io.read_split(root, split)]
      if split == "train":
        items += [("hard_negative", root, path) for path in _hard_negative_paths(root)]
    elif name == "piod":
      items = [("piod", root, image_id) for image_id in _piod_ids(root)[split]]
    elif name == "bsds_ownership":
      items = [
        ("bsds", root, image_id)
        for image_id in _bsds_ids(root, {"train": "trainfg", "test": "testfg"}[split])
      ]
    else:
      raise ValueError(f"unknown config {name!r}")
    return self.key_examples(items, _read_item)


def _read_item(item):
  """[(id, example)] of one `(kind, root, image id or path)` listed by `_generate_examples`."""
  kind, root, arg = item
  if kind == "realoob":
    img = realoob_io.image_path(root, arg)
    depth_path = realoob_io.field_path(root, realoob_io.DEPTH, arg)
    gt = realoob_io.read_gt(root, arg, with_depth=epath.Path(depth_path).is_file())
    gt["orientation"] = occlusion_formats.to_internal_angle(gt["orientation"]) * gt["boundaries"]
    _check_image_size(img, gt["boundaries"].shape)
    return [_example(arg, img, [gt], gt.get("depth"))]
  if kind == "hard_negative":
    h, w = _image_size(arg)
    empty = np.zeros((h, w), bool)
    ann = dict(boundaries=empty, valid=empty, orientation=np.zeros((h, w), np.float32))
    stem = os.path.splitext(os.path.basename(arg))[0]
    return [_example(stem, arg, [ann], hard_negative=True)]
  if kind == "piod":
    ann = occlusion_formats.read_piod(os.path.join(root, "Data", f"{arg}.mat"))
    img = os.path.join(root, "JPEGImages", f"{arg}.jpg")
    _check_image_size(img, ann["boundaries"].shape)
    return [_example(arg, img, [ann])]
  if kind == "bsds":
    folder, image_id = arg
    anns = occlusion_formats.read_bsds_ownership(os.path.join(root, folder, f"{image_id}.mat"))
    img = os.path.join(root, "BSDS300", "images", "train", f"{image_id}.jpg")
    _check_image_size(img, anns[0]["boundaries"].shape)
    return [_example(image_id, img, anns)]
  raise ValueError(f"unknown item kind {kind!r}")


def _example(image_id, image_path, anns, depth=None, hard_negative=False):
  h, w = anns[0]["boundaries"].shape
  boundaries = np.stack([a["boundaries"] for a in anns])
  orientation = np.stack([a["orientation"] for a in anns])
  valid = np.stack([a["valid"] for a in anns])
  return image_id, {
    "id": image_id,
    "image": image_path,
    "boundaries": boundaries,
    "orientation": orientation,
    "valid": valid,
    "depth": (np.zeros((h, w), np.float32) if depth is None else depth.astype(np.float32)),
    "hard_negative": hard_negative,
    "ob": sparse_labels(boundaries, orientation, valid),
  }


def _hard_negative_paths(root):
  """Sorted image paths in `root/hard_negatives/` (none if the folder is absent)."""
  hn_dir = os.path.join(root, "hard_negatives")
  if not epath.Path(hn_dir).is_dir():
    return []
  out = []
  for name in sorted(p.name for p in epath.Path(hn_dir).iterdir()):
    stem, ext = os.path.splitext(name)
    if ext.lower() not in (".png", ".jpg", ".jpeg") or stem.startswith("."):
      continue
    out.append(os.path.join(hn_dir, name))
  return out


def _bsds_ids(root, folder):
  """[(folder, id)] of the `<id>.mat` files in `root/folder`, sorted."""
  d = os.path.join(root, folder)
  if not epath.Path(d).is_dir():
    raise occlusion_formats.OcclusionFormatError(
      f"{d}: BSDS-ownership annotation folder is missing"
    )
  return [
    (folder, name[:-4])
    for name in sorted(p.name for p in epath.Path(d).iterdir())
    if name.endswith(".mat")
  ]


def _piod_ids(root):
  """{'train': ids, 'test': ids}: val_doc_2010.txt is test, other Data/ train."""
  val_path = os.path.join(root, "val_doc_2010.txt")
  if not epath.Path(val_path).is_file():
    raise occlusion_formats.OcclusionFormatError(f"{val_path}: PIOD test list is missing")
  lines = epath.Path(val_path).read_text(encoding="utf-8").splitlines()
  test_ids = sorted({l.strip() for l in lines if l.strip()})
  data = os.path.join(root, "Data")
  if not epath.Path(data).is_dir():
    raise occlusion_formats.OcclusionFormatError(f"{data}: PIOD annotation folder is missing")
  all_ids = sorted(p.name[:-4] for p in epath.Path(data).iterdir() if p.name.endswith(".mat"))
  test_set = set(test_ids)
  return {"train": [i for i in all_ids if i not in test_set], "test": test_ids}


def _image_size(path):
  """(H, W) of a PNG/JPEG read from its header, or an error naming it."""
  if not epath.Path(path).is_file():
    raise occlusion_formats.OcclusionFormatError(f"{path}: image is missing")
  from PIL import Image  # pylint: disable=g-import-not-at-top

  try:
    with Image.open(path) as im:
      w, h = im.size
      mode = im.mode
  except Exception as e:  # PIL raises several types.
    raise occlusion_formats.OcclusionFormatError(f"{path}: not a readable image ({e})") from e
  if mode != "RGB":
    raise occlusion_formats.OcclusionFormatError(f"{path}: image must be RGB, got mode {mode}")
  return h, w


def _check_image_size(path, shape):
  hw = _image_size(path)
  if hw != tuple(shape):
    raise occlusion_formats.OcclusionFormatError(
      f"{path}: image is {hw[0]}x{hw[1]}, annotation is {shape[0]}x{shape[1]}"
    )
