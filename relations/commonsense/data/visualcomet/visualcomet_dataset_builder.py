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
  *_features  the same plus the released 2048-d features of the visual slots

Examples are stored in official expansion order (shuffling disabled), so
`builder.as_data_source(split)[i]["expansion_index"] == i`; the trainer
shuffles. Features of one example:

  expansion_index  int32      position in the official expansion of the split
  event_idx        int32      position of the event in `<split>_annots.json`
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
                   name2person = records.name2person_from_keys(person_keys).
  rank_key         text       img_fn + '_' + event + '_' + relation
  image            uint8 [H, W, 3] (the VCR JPEG bytes, stored as-is)
  width, height    int32      from the metadata
  names            sequence of text [N]: class of every VCR detection
  boxes            float32 [N, 4] x1, y1, x2, y2 pixels (x2/y2 clipped to the
                   image); tag t refers to row t - 1
  box_scores       float32 [N]
  dets             int32 [M]: the official visual-slot detections
                   (`get_dets_to_use`: detections named by person_keys, else
                   all people; ascending; not truncated; the model keeps
                   `sequence.slot_dets(dets)`, i.e. <= 14 after the image)
  features configs only:
  visual_features  float32 [1 + min(M, 14), 2048]: image feature, then the
                   object features of the kept dets (official order)

Each example's image is stored once per example (simple random access; for
the full real training split this duplicates images ~20x).
"""

import functools

from etils import epath
import numpy as np
import tensorflow_datasets as tfds

from relations import tfds_util
from relations.commonsense.data.visualcomet import records as records_lib
from relations.commonsense.text import person_tags
from relations.commonsense.text import sequence

_SPLITS = {
    'training': ('train', 'val'),
    'generation': ('train', 'val', 'test'),
    'ranking': ('val',),
}


class VisualCometConfig(tfds.core.BuilderConfig):
  """Expansion + whether to include the released features."""

  def __init__(self, *, expansion: str, with_features: bool, **kwargs):
    super().__init__(**kwargs)
    self.expansion = expansion
    self.with_features = with_features


def _configs():
  out = []
  for exp in ('training', 'generation', 'ranking'):
    for feats in (False, True):
      out.append(VisualCometConfig(
          name=exp + ('_features' if feats else ''), expansion=exp,
          with_features=feats,
          description=f'{exp} expansion' + (' + released features'
                                            if feats else '')))
  return out


class Builder(tfds_util.BeamOrGenerator, tfds.core.GeneratorBasedBuilder):
  """VisualCOMET (Park et al., ECCV 2020) with VCR images and boxes."""

  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'Initial release.'}
  BUILDER_CONFIGS = _configs()
  MANUAL_DOWNLOAD_INSTRUCTIONS = """\
  Put into manual_dir: {train,val,test}_annots.json (visualcomet.zip),
  vcr1images/ (VCR vcr1images.zip, images + metadata JSON) and, for the
  *_features configs, features/<image id>.pkl (features.zip).
  """

  def _info(self) -> tfds.core.DatasetInfo:
    text = tfds.features.Text()
    feats = dict(
        expansion_index=np.int32, event_idx=np.int32,
        img_fn=text, movie=text, metadata_fn=text, split=text, place=text,
        event=text, event_name=text, relation=text,
        inference_text=text, inference_text_name=text,
        references=tfds.features.Sequence(text),
        references_name=tfds.features.Sequence(text),
        person_keys=tfds.features.Sequence(text),
        rank_key=text,
        image=tfds.features.Image(shape=(None, None, 3),
                                  encoding_format='jpeg'),
        width=np.int32, height=np.int32,
        names=tfds.features.Sequence(text),
        boxes=tfds.features.Tensor(shape=(None, 4), dtype=np.float32),
        box_scores=tfds.features.Tensor(shape=(None,), dtype=np.float32),
        dets=tfds.features.Tensor(shape=(None,), dtype=np.int32),
    )
    if self.builder_config.with_features:
      feats['visual_features'] = tfds.features.Tensor(
          shape=(None, records_lib.FEATURE_DIM), dtype=np.float32)
    return self.dataset_info_from_configs(
        features=tfds.features.FeaturesDict(feats),
        # Official expansion order: data_source[i] is expansion index i.
        disable_shuffling=True,
        homepage='https://visualcomet.xyz',
        citation=('@inproceedings{park2020visualcomet, title={VisualCOMET: '
                  'Reasoning about the Dynamic Context of a Still Image}, '
                  'author={Park, Jae Sung and Bhagavatula, Chandra and '
                  'Mottaghi, Roozbeh and Farhadi, Ali and Choi, Yejin}, '
                  'booktitle={ECCV}, year={2020}}'),
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = epath.Path(dl_manager.manual_dir)
    return {split: self._generate_examples(root, split)
            for split in _SPLITS[self.builder_config.expansion]}

  def _generate_examples(self, root: epath.Path, split: str):
    """(expansion index, example): a generator, or a Beam PTransform under Beam.

    One work item per run of adjacent records of one image (its metadata is read once):
    `(first expansion index, first record, end record)`. Items are small so a Beam pipeline
    stays small; each Beam worker reads the annotation file itself (once).
    """
    cfg = self.builder_config
    path = str(root / f'{split}_annots.json')
    recs = records_lib.load_annotations(path)
    groups = []
    k = 0
    for idx, rec in enumerate(recs):
      if groups and recs[groups[-1][1]]['metadata_fn'] == rec['metadata_fn']:
        groups[-1][2] = idx + 1
      else:
        groups.append([k, idx, idx + 1])
      k += len(records_lib.expand_record(rec, idx, cfg.expansion))
    return self.key_examples(
        [tuple(g) for g in groups],
        functools.partial(_image_examples, root=str(root), path=path, split=split,
                          expansion=cfg.expansion, with_features=cfg.with_features,
                          records=None if self.building_with_beam else recs))


@functools.lru_cache(maxsize=1)
def _cached_annotations(path: str):
  return records_lib.load_annotations(path)


def _image_examples(group, root, path, split, expansion, with_features, records=None):
  """Yields (k, example) of the records `group = (k0, start, end)` (one image)."""
  k, start, end = group
  if records is None:  # On a Beam worker.
    records = _cached_annotations(path)
  root = epath.Path(root)
  images = root / records_lib.IMAGES_DIR
  meta = None
  for idx in range(start, end):
    for item in records_lib.expand_record(records[idx], idx, expansion):
      where = f'{path}: record {item["event_idx"]}'
      if meta is None:
        meta = records_lib.load_metadata(str(images / item['metadata_fn']))
      img_path = images / item['img_fn']
      if not img_path.exists():
        raise FileNotFoundError(f"{where}: field 'img_fn': image not found: "
                                f'{img_path}')
      keys = list(item['person2name'])
      dets = sequence.select_dets(meta['names'],
                                  person_tags.tag_numbers(item['person2name']))
      refs = item.get('inference_text', [])
      refs_name = item.get('inference_text_name', [])
      single = expansion != 'generation'
      ex = dict(
          expansion_index=k, event_idx=item['event_idx'],
          img_fn=item['img_fn'], movie=item.get('movie', ''),
          metadata_fn=item['metadata_fn'], split=item.get('split', split),
          place=item['place'], event=item['event'],
          event_name=item['event_name'], relation=item['inference_relation'],
          inference_text=refs if single else '',
          inference_text_name=refs_name if single else '',
          references=[] if single else list(refs),
          references_name=[] if single else list(refs_name),
          person_keys=keys, rank_key=records_lib.rank_key(item),
          image=str(img_path), width=meta['width'], height=meta['height'],
          names=meta['names'], boxes=meta['boxes'].reshape(-1, 4),
          box_scores=meta['scores'], dets=dets.astype(np.int32),
      )
      if with_features:
        fpath = (root / records_lib.FEATURES_DIR
                 / (records_lib.image_id(item['img_fn']) + '.pkl'))
        f = records_lib.load_features(str(fpath), len(meta['names']))
        kept = sequence.slot_dets(dets)
        ex['visual_features'] = np.concatenate(
            [f['image_features'][None], f['object_features'][kept]], 0)
      yield k, ex
      k += 1
