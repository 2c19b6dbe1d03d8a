"""TFDS builder `visualcomet` (VisualCOMET annotations + VCR images/boxes).

Reads `manual_dir` in the official layout (see `records.py`): the
`{train,val,test}_annots.json` lists, `vcr1images/` with images and per-image
metadata, and, for the `*_features` configs, `features/<image id>.pkl`
(loaded with the restricted unpickler). Write the synthetic equivalent with
`python -m relations.commonsense.data.synthetic --out DIR`.

Configs (record expansions of the official code):
  training    one example per ground-truth inference (splits train, val)
  generation  one example per event x relation, all three relations
              (splits train, val, test; test has no references)
  ranking     training-style expansion of val (split val), for Acc@50
  *_features  the same, for models on the released 2048-d features
  images      the image table: each image of a split once, with its VCR
              JPEG and metadata (splits train, val, test)
  images_features  the same without the JPEG, with the image's released
              features (image + every detection), once per image

Each image (and its features) is stored once, in the image table; an
expansion example refers to its row by `image_index`. `data_source(...)`
(what the task reads) joins the two and returns the example as the official
expansion sees it: the features below, including `image` (expansion configs)
or `visual_features` (`*_features` configs; such a source never reads, let
alone decodes, a JPEG). With ~20 inferences per image, the `training` split
takes about the unique images' bytes on disk instead of ~20x.

Examples are stored in official expansion order (shuffling disabled), so
`data_source(...)[i]["expansion_index"] == i`; the trainer shuffles. Image
table rows follow `records.unique_images` (first appearance in the JSON).
Features of one joined example:

  expansion_index  int32      position in the official expansion of the split
  event_idx        int32      position of the event in `<split>_annots.json`
  image_index      int32      row of the image in the split's image table
  img_fn, movie, metadata_fn, split, place, event   text, as in the JSON
  event_name       text       event with `<|detN|>` tags (person_tags)
  relation         text       'intent' | 'before' | 'after'
  inference_text, inference_text_name   text (training/ranking: the one
                   ground-truth sentence, raw and tag-mapped)
  references, references_name   sequence of text (generation: all ground
                   truths of this event x relation; empty if none)
  person_keys      sequence of text: the keys of the official `person2name`
                   (digit strings as written; event tags plus the tags of the
                   inference(s) attached, as the official expansion does).
                   name2person = person_tags.name2person_from_keys(person_keys).
  rank_key         text       img_fn + '_' + event + '_' + relation
  dets             int32 [M]: the official visual-slot detections
                   (`get_dets_to_use`: detections named by person_keys, else
                   all people; ascending; not truncated; the model keeps
                   `sequence.slot_dets(dets)`, i.e. <= 14 after the image)
  from the image table:
  image            uint8 [H, W, 3] (the VCR JPEG bytes, stored as-is;
                   expansion configs without `_features`)
  image_small      uint8 [h, w, 3]: the image area-downsampled to a short
                   side of SMALL_SIDE px (never enlarged), JPEG q90: what a
                   ViT trained at <= SMALL_SIDE px decodes (~1/10 of the
                   original's bytes and decode time); read with
                   `image="jpeg"` only
  width, height    int32      from the metadata
  names            sequence of text [N]: class of every VCR detection
  boxes            float32 [N, 4] x1, y1, x2, y2 pixels (x2/y2 clipped to the
                   image); tag t refers to row t - 1
  box_scores       float32 [N]
  features configs only:
  visual_features  float32 [1 + min(M, 14), 2048]: image feature, then the
                   object features of the kept dets (official order), from
                   the table's image_features [2048] / object_features [N, 2048]
"""

import functools
import io

import cv2
from etils import epath
import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.proto import tf_example_pb2 as _example_pb2

from relations import tfds_util
from relations.commonsense.data.visualcomet import records as records_lib
from relations.commonsense.text import person_tags
from relations.commonsense.text import sequence

_SPLITS = {
  'training': ('train', 'val'),
  'generation': ('train', 'val', 'test'),
  'ranking': ('val',),
  'images': ('train', 'val', 'test'),
}
# Fields of the image table that a joined example carries.
_TABLE_FIELDS = ('width', 'height', 'names', 'boxes', 'box_scores')
# Short side of the table's training-size copy of each image (`image_small`).
SMALL_SIDE = 256
SMALL_QUALITY = 90


class VisualCometConfig(tfds.core.BuilderConfig):
  """Expansion (or the image table) + whether to include the released features."""

  def __init__(self, *, expansion: str, with_features: bool, **kwargs):
    super().__init__(**kwargs)
    self.expansion = expansion
    self.with_features = with_features


def _configs():
  out = []
  for exp in ('training', 'generation', 'ranking', 'images'):
    for feats in (False, True):
      what = 'image table' if exp == 'images' else f'{exp} expansion'
      out.append(
        VisualCometConfig(
          name=exp + ('_features' if feats else ''),
          expansion=exp,
          with_features=feats,
          description=what + (' + released features' if feats else ''),
        )
      )
  return out


def table_config(config_name: str) -> str:
  """The image-table config an expansion config refers to."""
  return 'images_features' if config_name.endswith('_features') else 'images'


def image_example(
  root: epath.Path, split: str, row: int, image: tuple[int, str, str], with_features: bool
) -> dict:
  """Row `row` of the split's image table (plain function: Beam can map it).

  Args:
    root: manual_dir.
    split: split name (names the annotation file in errors).
    row: the row (`image_index`).
    image: (first record index, img_fn, metadata_fn) from `unique_images`.
    with_features: features instead of the JPEG.
  """
  rec_idx, img_fn, metadata_fn = image
  where = f'{root / f"{split}_annots.json"}: record {rec_idx}'
  images = root / records_lib.IMAGES_DIR
  meta = records_lib.load_metadata(str(images / metadata_fn))
  ex = dict(
    image_index=row,
    img_fn=img_fn,
    width=meta['width'],
    height=meta['height'],
    names=meta['names'],
    boxes=meta['boxes'].reshape(-1, 4),
    box_scores=meta['scores'],
  )
  if with_features:
    fpath = root / records_lib.FEATURES_DIR / (records_lib.image_id(img_fn) + '.pkl')
    f = records_lib.load_features(str(fpath), len(meta['names']))
    ex['image_features'] = f['image_features']
    ex['object_features'] = f['object_features'].reshape(-1, records_lib.FEATURE_DIM)
  else:
    img_path = images / img_fn
    if not img_path.exists():
      raise FileNotFoundError(f"{where}: field 'img_fn': image not found: {img_path}")
    ex['image'] = str(img_path)
    ex['image_small'] = io.BytesIO(small_jpeg(img_path.read_bytes(), where))
  return ex


def small_jpeg(data: bytes, where: str = 'image') -> bytes:
  """JPEG bytes -> the `image_small` JPEG: short side SMALL_SIDE (area
  interpolation; smaller images keep their size), quality SMALL_QUALITY."""
  img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
  if img is None:
    raise records_lib.DataError(f"{where}: field 'img_fn': not a decodable JPEG")
  h, w = img.shape[:2]
  f = SMALL_SIDE / min(h, w)
  if f < 1:
    size = (max(1, int(round(w * f))), max(1, int(round(h * f))))
    img = cv2.resize(img, size, interpolation=cv2.INTER_AREA)
  ok, enc = cv2.imencode('.jpg', img, [cv2.IMWRITE_JPEG_QUALITY, SMALL_QUALITY])
  if not ok:
    raise records_lib.DataError(f'{where}: could not encode the small copy')
  return enc.tobytes()


def expansion_example(
  root: epath.Path, split: str, expansion: str, k: int, item: dict, image_index: int, meta: dict
) -> dict:
  """Example `k` of an expansion (plain function: Beam can map it).

  Args:
    root: manual_dir.
    split: split name.
    expansion: 'training' | 'generation' | 'ranking'.
    k: expansion index.
    item: the expanded record (`records.expand_record`).
    image_index: row of its image in the image table.
    meta: the image's metadata (`records.load_metadata`).
  """
  where = f'{root / f"{split}_annots.json"}: record {item["event_idx"]}'
  img_path = root / records_lib.IMAGES_DIR / item['img_fn']
  if not img_path.exists():
    raise FileNotFoundError(f"{where}: field 'img_fn': image not found: {img_path}")
  keys = list(item['person2name'])
  dets = sequence.select_dets(meta['names'], person_tags.tag_numbers(item['person2name']))
  refs = item.get('inference_text', [])
  refs_name = item.get('inference_text_name', [])
  single = expansion != 'generation'
  return dict(
    expansion_index=k,
    event_idx=item['event_idx'],
    image_index=image_index,
    img_fn=item['img_fn'],
    movie=item.get('movie', ''),
    metadata_fn=item['metadata_fn'],
    split=item.get('split', split),
    place=item['place'],
    event=item['event'],
    event_name=item['event_name'],
    relation=item['inference_relation'],
    inference_text=refs if single else '',
    inference_text_name=refs_name if single else '',
    references=[] if single else list(refs),
    references_name=[] if single else list(refs_name),
    person_keys=keys,
    rank_key=records_lib.rank_key(item),
    dets=dets.astype(np.int32),
  )


# How each stored field is read back (`_read`): the expansion and table features.
_TEXT = (
  'img_fn',
  'movie',
  'metadata_fn',
  'split',
  'place',
  'event',
  'event_name',
  'relation',
  'inference_text',
  'inference_text_name',
  'rank_key',
)
_TEXTS = ('references', 'references_name', 'person_keys', 'names')
_INTS = ('expansion_index', 'event_idx', 'image_index', 'width', 'height')


def _read(raw: bytes, keys) -> dict:
  """The fields `keys` of one stored example, decoded as `as_data_source` does.

  Reads the serialized tf.train.Example directly (a few microseconds per
  field instead of TFDS' generic per-feature decoding, ~100 us per example):
  text stays bytes, text sequences become lists of bytes, the JPEG stays
  encoded (`image`: bytes), features are viewed from their raw bytes.
  """
  fm = _example_pb2.Example.FromString(raw).features.feature
  out = {}
  for k in keys:
    f = fm[k]
    if k in _TEXT:
      out[k] = f.bytes_list.value[0]
    elif k in _TEXTS:
      out[k] = list(f.bytes_list.value)
    elif k in _INTS:
      out[k] = int(f.int64_list.value[0])
    elif k == 'dets':
      out[k] = np.array(f.int64_list.value, np.int32)
    elif k == 'boxes':
      out[k] = np.array(f.float_list.value, np.float32).reshape(-1, 4)
    elif k == 'box_scores':
      out[k] = np.array(f.float_list.value, np.float32)
    elif k == 'image_features':
      out[k] = np.frombuffer(f.bytes_list.value[0], np.float32)
    elif k == 'object_features':
      out[k] = np.frombuffer(f.bytes_list.value[0], np.float32).reshape(-1, records_lib.FEATURE_DIM)
    elif k in ('image', 'image_small'):
      out[k] = f.bytes_list.value[0]
    else:
      raise KeyError(k)
  return out


def decode_jpeg(data: bytes) -> np.ndarray:
  """JPEG bytes -> uint8 [H, W, 3] RGB, the pixels `as_data_source` gives (OpenCV)."""
  img = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
  if img is None:
    raise records_lib.DataError('stored image is not a decodable JPEG')
  return cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


class DataSource:
  """An expansion split joined with its image table (module docstring).

  `len`, `[i]` like `as_data_source`; `[i]` is the example with the image
  table's fields of its image. Features configs read `visual_features` from
  the table (no JPEG exists there); the others return the image decoded
  (`image="decoded"`, as `as_data_source` would), still encoded (`"jpeg"`:
  bytes, with `image_small` too, for a reader that decodes it at the size it
  needs) or not at all
  (`None`). Picklable (grain workers).

  Args:
    examples: the prepared expansion builder (any expansion config).
    table: the prepared image-table builder (`table_config` of it).
    split: the split.
    image: "decoded" | "jpeg" | None (non-features configs).
  """

  def __init__(self, examples, table, split: str, image: str | None = 'decoded'):
    raw = tfds.decode.DeserializeMethod.RAW_BYTES
    self._examples = examples.as_data_source(split, deserialize_method=raw)
    self._example_keys = tuple(examples.info.features.keys())
    self._features = bool(examples.builder_config.with_features)
    if table.builder_config.expansion != 'images' or (
      bool(table.builder_config.with_features) != self._features
    ):
      raise ValueError(
        f'{table.builder_config.name} is not the image table of {examples.builder_config.name}'
      )
    if image not in ('decoded', 'jpeg', None):
      raise ValueError(f'image: expected "decoded", "jpeg" or None, got {image!r}')
    self._image = None if self._features else image
    self._table = table.as_data_source(split, deserialize_method=raw)
    self._table_keys = _TABLE_FIELDS + (
      ('image_features', 'object_features')
      if self._features
      else ('image', 'image_small')
      if self._image == 'jpeg'
      else ('image',)
      if self._image
      else ()
    )

  def __len__(self) -> int:
    return len(self._examples)

  def __getitem__(self, index: int) -> dict:
    ex = _read(self._examples[index], self._example_keys)
    row = _read(self._table[ex['image_index']], self._table_keys)
    for key in _TABLE_FIELDS:
      ex[key] = row[key]
    if self._features:
      kept = sequence.slot_dets(ex['dets'].astype(np.int64))
      ex['visual_features'] = np.concatenate(
        [row['image_features'][None], row['object_features'][kept]], 0
      )
    elif self._image == 'decoded':
      ex['image'] = decode_jpeg(row['image'])
    elif self._image == 'jpeg':
      ex['image'] = row['image']
      ex['image_small'] = row['image_small']
    return ex


class Builder(tfds_util.BeamOrGenerator, tfds.core.GeneratorBasedBuilder):
  """VisualCOMET (Park et al., ECCV 2020) with VCR images and boxes."""

  VERSION = tfds.core.Version('2.1.0')
  RELEASE_NOTES = {
    '1.0.0': 'Initial release.',
    '2.0.0': 'Images and features stored once per image, in the image '
    'table configs (images, images_features); examples refer to '
    'them by image_index.',
    '2.1.0': 'Image table: image_small, a training-size copy of each image '
    '(short side 256 px, JPEG q90) that ViT configs decode instead.',
  }
  BUILDER_CONFIGS = _configs()
  MANUAL_DOWNLOAD_INSTRUCTIONS = """\
  Put into manual_dir: {train,val,test}_annots.json (visualcomet.zip),
  vcr1images/ (VCR vcr1images.zip, images + metadata JSON) and, for the
  *_features configs, features/<image id>.pkl (features.zip).
  """

  def _info(self) -> tfds.core.DatasetInfo:
    text = tfds.features.Text()
    cfg = self.builder_config
    if cfg.expansion == 'images':
      feats = dict(
        image_index=np.int32,
        img_fn=text,
        width=np.int32,
        height=np.int32,
        names=tfds.features.Sequence(text),
        boxes=tfds.features.Tensor(shape=(None, 4), dtype=np.float32),
        box_scores=tfds.features.Tensor(shape=(None,), dtype=np.float32),
      )
      if cfg.with_features:
        # Raw float32 bytes: read back with one np.frombuffer (`_read`).
        feats['image_features'] = tfds.features.Tensor(
          shape=(records_lib.FEATURE_DIM,), dtype=np.float32, encoding=tfds.features.Encoding.BYTES
        )
        feats['object_features'] = tfds.features.Tensor(
          shape=(None, records_lib.FEATURE_DIM),
          dtype=np.float32,
          encoding=tfds.features.Encoding.BYTES,
        )
      else:
        feats['image'] = tfds.features.Image(shape=(None, None, 3), encoding_format='jpeg')
        feats['image_small'] = tfds.features.Image(shape=(None, None, 3), encoding_format='jpeg')
    else:
      feats = dict(
        expansion_index=np.int32,
        event_idx=np.int32,
        image_index=np.int32,
        img_fn=text,
        movie=text,
        metadata_fn=text,
        split=text,
        place=text,
        event=text,
        event_name=text,
        relation=text,
        inference_text=text,
        inference_text_name=text,
        references=tfds.features.Sequence(text),
        references_name=tfds.features.Sequence(text),
        person_keys=tfds.features.Sequence(text),
        rank_key=text,
        dets=tfds.features.Tensor(shape=(None,), dtype=np.int32),
      )
    return self.dataset_info_from_configs(
      features=tfds.features.FeaturesDict(feats),
      # Official expansion order: data_source[i] is expansion index i (and
      # image table row i is image_index i).
      disable_shuffling=True,
      homepage='https://visualcomet.xyz',
      citation=(
        '@inproceedings{park2020visualcomet, title={VisualCOMET: '
        'Reasoning about the Dynamic Context of a Still Image}, '
        'author={Park, Jae Sung and Bhagavatula, Chandra and '
        'Mottaghi, Roozbeh and Farhadi, Ali and Choi, Yejin}, '
        'booktitle={ECCV}, year={2020}}'
      ),
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = epath.Path(dl_manager.manual_dir)
    return {
      split: self._generate_examples(root, split)
      for split in _SPLITS[self.builder_config.expansion]
    }

  def _generate_examples(self, root: epath.Path, split: str):
    """(expansion index, example): a generator, or a Beam PTransform under Beam.

    One work item per run of adjacent records of one image (its metadata is read once):
    `(first expansion index, first record, end record)`. Items are small so a Beam pipeline
    stays small; each Beam worker reads the annotation file itself (once).
    """
    cfg = self.builder_config
    path = str(root / f'{split}_annots.json')
    recs = records_lib.load_annotations(path)
    table = records_lib.unique_images(recs)
    if cfg.expansion == 'images':
      return self.key_examples(
        list(enumerate(table)),
        functools.partial(
          _table_rows, root=str(root), split=split, with_features=cfg.with_features
        ),
      )
    # One work item per run of records that share an image: (first expansion
    # index, first record, end record); the image's metadata is read once.
    groups = []
    k = 0
    for idx, rec in enumerate(recs):
      if groups and recs[groups[-1][1]]['metadata_fn'] == rec['metadata_fn']:
        groups[-1][2] = idx + 1
      else:
        groups.append([k, idx, idx + 1])
      k += len(records_lib.expand_record(rec, idx, cfg.expansion))
    row_of = {img_fn: row for row, (_, img_fn, _) in enumerate(table)}
    return self.key_examples(
      [tuple(g) for g in groups],
      functools.partial(
        _image_examples,
        root=str(root),
        path=path,
        split=split,
        expansion=cfg.expansion,
        row_of=row_of,
        records=None if self.building_with_beam else recs,
      ),
    )


@functools.lru_cache(maxsize=1)
def _cached_annotations(path: str):
  return records_lib.load_annotations(path)


def _table_rows(item, root, split, with_features):
  """Yields (row, image-table example) of `item = (row, unique_images entry)`."""
  row, image = item
  yield row, image_example(epath.Path(root), split, row, image, with_features)


def _image_examples(group, root, path, split, expansion, row_of, records=None):
  """Yields (k, example) of the records `group = (k0, start, end)` (one image)."""
  k, start, end = group
  if records is None:  # On a Beam worker.
    records = _cached_annotations(path)
  root = epath.Path(root)
  images = root / records_lib.IMAGES_DIR
  meta = None
  for idx in range(start, end):
    for item in records_lib.expand_record(records[idx], idx, expansion):
      if meta is None:
        meta = records_lib.load_metadata(str(images / item['metadata_fn']))
      yield k, expansion_example(root, split, expansion, k, item, row_of[item['img_fn']], meta)
      k += 1
