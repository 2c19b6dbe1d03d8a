r"""Learnable synthetic VisualCOMET data in the official on-disk layout.

  python -m relations.commonsense.data.synthetic --out DIR [--seed 0]
      [--train_images 120 --val_images 30 --test_images 15] [--image_size 128]

writes (a `manual_dir` for the `visualcomet` TFDS builder):

  DIR/{train,val,test}_annots.json   lists of event records (test
                                     records have no inferences)
  DIR/vcr1images/<movie>/<id>.jpg    images
  DIR/vcr1images/<movie>/<id>.json   VCR metadata: names, boxes [x1,y1,x2,y2,
                                     score], segms (polygons), width, height
  DIR/features/<id>.pkl              {"image_features": (2048,) float32,
                                      "object_features": (N, 2048) float32}
  DIR/tokenizer/{vocab.json,merges.txt}  byte-level BPE trained on train text
  DIR/truth.json                     per image: the hidden attributes
  DIR/stats.json                     the printed corpus statistics

Each image shows 2-4 people with three visible attributes: clothing colour
(red/blue/green/yellow = chef/police officer/gardener/student), a held object
(cup/book/phone/ball) and a pose (standing/sitting/arms up), plus 0-2
non-person detections (tv, clock) so that tags index all detections, as in
VCR. Events mention a subject and another person by tag with neutral verbs
("1 is talking to 3") that reveal no attribute; the place names the
background. The inferences come from template pools chosen by the subject's
visible attributes: intent by held object, before by clothing colour, after
by pose (plus place- and person-tag-dependent phrases). So a model reading
only event + place can at best guess the attribute (about 1/4 for intent and
before, 1/3 for after), while a model that looks at the subject's box can
know it. Everything is a deterministic function of --seed. The features are a
fixed random projection of 8x8 colour thumbnails of each box (a stand-in for
the released ResNet features, same format).
"""

import argparse
import json
import os
import pickle
import shutil
import tempfile
from typing import Any

import numpy as np
from PIL import Image
from PIL import ImageDraw

from relations.commonsense.text import person_tags
from relations.commonsense.text import tokenizer as tokenizer_lib

COLOURS = {
  'red': (220, 30, 30),
  'blue': (30, 60, 220),
  'green': (30, 170, 50),
  'yellow': (240, 220, 30),
}
OBJECTS = ('cup', 'book', 'phone', 'ball')
POSES = ('standing', 'sitting', 'arms_up')
PLACES = {  # place text -> (short noun, background colour)
  'in a kitchen': ('kitchen', (235, 230, 215)),
  'at a park': ('park', (170, 210, 240)),
  'in an office': ('office', (190, 190, 190)),
  'at a party': ('party', (95, 60, 115)),
}
EVENTS = (
  '{s} is talking to {o}',
  '{s} is looking at {o}',
  '{s} is waiting for {o}',
  '{s} is listening to {o}',
  '{s} is smiling at {o}',
  '{s} is next to {o}',
)
INTENT = {
  'cup': [
    'drink some coffee',
    'warm up with a hot drink',
    'share a drink with {o}',
    'take a short break',
  ],
  'book': ['read the story', 'learn something new', 'show the book to {o}', 'finish the chapter'],
  'phone': ['call a friend', 'check the messages', 'take a photo of {o}', 'find the address'],
  'ball': ['play a game', 'throw the ball to {o}', 'win the match', 'have some fun'],
}
BEFORE = {
  'red': [
    'put on the red apron',
    'cook a big meal',
    'chop some vegetables',
    'taste the soup',
    'wash the pots',
  ],
  'blue': [
    'put on the blue uniform',
    'patrol the street',
    'drive the police car',
    'check the radio',
    'write a ticket',
  ],
  'green': [
    'water the plants',
    'dig in the garden',
    'cut the grass',
    'plant some seeds',
    'carry the green hose',
  ],
  'yellow': [
    'study for the exam',
    'walk to school',
    'pack the yellow bag',
    'finish the homework',
    'meet {x} in class',
  ],
}
AFTER = {
  'standing': [
    'walk to the door',
    'leave the {p}',
    'go home with {o}',
    'shake hands with {o}',
    "take {o}'s hand",
  ],
  'sitting': [
    'stand up slowly',
    'take a nap',
    'rest for a while',
    'stay in the chair',
    'ask {o} to sit down',
  ],
  'arms_up': ['cheer loudly', 'jump with joy', 'wave to {o}', 'dance with {o}', 'clap the hands'],
}
SKIN, LEGS = (230, 190, 150), (60, 60, 70)
OBJECT_DRAW = {
  'cup': (120, 70, 30),
  'book': (250, 250, 250),
  'phone': (15, 15, 15),
  'ball': (255, 140, 0),
}
FEATURE_DIM = 2048


# ----------------------------------------------------------------- drawing
def _draw_person(
  draw: ImageDraw.ImageDraw,
  cx: float,
  foot: float,
  h: float,
  colour: str,
  obj: str,
  pose: str,
  part: str,
) -> list[float]:
  """Draws the body or the held object of one person.

  Args:
    draw: the canvas.
    cx, foot, h: centre x, foot y and standing height in pixels.
    colour, obj, pose: the attributes.
    part: 'body' or 'object'. All bodies are drawn before all objects so
      that a neighbour never hides a held object (it must stay visible).

  Returns:
    The person's tight box [x1, y1, x2, y2] (body and object).
  """
  body = part == 'body'
  noop = lambda *a, **k: None  # pylint: disable=unnecessary-lambda-assignment
  d_rect, d_ellipse, d_line = (
    (draw.rectangle, draw.ellipse, draw.line) if body else (noop, noop, noop)
  )
  w = 0.36 * h
  head_r = 0.11 * h
  if pose == 'sitting':
    h = 0.78 * h  # A sitting person is shorter; legs go sideways.
  top = foot - h
  xs, ys = [], []

  def rect(x1, y1, x2, y2, fill):
    d_rect([x1, y1, x2, y2], fill=fill)
    xs.extend([x1, x2]), ys.extend([y1, y2])

  def line(x1, y1, x2, y2, width):
    d_line([x1, y1, x2, y2], fill=SKIN, width=width)
    xs.extend([x1 - width / 2, x2 + width / 2])
    ys.extend([y1 - width / 2, y2 + width / 2])

  d_ellipse([cx - head_r, top, cx + head_r, top + 2 * head_r], fill=SKIN)
  xs.extend([cx - head_r, cx + head_r]), ys.extend([top, top + 2 * head_r])
  t_top, t_bot = top + 2 * head_r, top + 2 * head_r + 0.4 * h
  rect(cx - w / 2, t_top, cx + w / 2, t_bot, COLOURS[colour])
  leg_w = max(2, int(0.09 * h))
  if pose == 'sitting':
    rect(cx - w / 2, t_bot - leg_w, cx + w, t_bot, LEGS)
    rect(cx + w - leg_w, t_bot, cx + w, foot, LEGS)
  else:
    rect(cx - w / 2, t_bot, cx - w / 2 + leg_w, foot, LEGS)
    rect(cx + w / 2 - leg_w, t_bot, cx + w / 2, foot, LEGS)
  arm = max(2, int(0.07 * h))
  if pose == 'arms_up':
    line(cx - w / 2, t_top + 2, cx - w * 0.8, top - 0.05 * h, arm)
    line(cx + w / 2, t_top + 2, cx + w * 0.8, top - 0.05 * h, arm)
    hx, hy = cx + w * 0.8, top - 0.05 * h
  else:
    line(cx - w / 2, t_top + 2, cx - w * 0.75, t_bot, arm)
    line(cx + w / 2, t_top + 2, cx + w * 0.75, t_bot, arm)
    hx, hy = cx + w * 0.75, t_bot
  s = max(5.0, 0.18 * h)  # held object size: big enough to see
  fill = OBJECT_DRAW[obj]
  if body:
    draw = ImageDraw.Draw(Image.new('RGB', (1, 1)))  # object drawn later
  if obj == 'ball':
    box = [hx - s / 2, hy - s, hx + s / 2 + 1, hy]
    draw.ellipse(box, fill=fill)
  elif obj == 'cup':
    box = [hx - s / 3, hy - s, hx + s / 3, hy]
    draw.rectangle(box, fill=fill)
  elif obj == 'book':
    box = [hx - s * 0.7, hy - s * 0.8, hx + s * 0.7, hy]
    draw.rectangle(box, fill=fill, outline=(0, 0, 0))
  else:  # phone: thin and tall
    box = [hx - s / 5, hy - s * 1.1, hx + s / 5, hy]
    draw.rectangle(box, fill=fill)
  xs.extend([box[0], box[2]]), ys.extend([box[1], box[3]])
  return [min(xs), min(ys), max(xs), max(ys)]


def _draw_background(draw, size: int, place: str) -> None:
  _, bg = PLACES[place]
  draw.rectangle([0, 0, size, size], fill=bg)
  if place == 'in a kitchen':  # tiles
    for k in range(0, size, max(4, size // 8)):
      draw.line([0, k, size, k], fill=(200, 195, 185))
  elif place == 'at a park':  # ground
    draw.rectangle([0, int(size * 0.8), size, size], fill=(200, 180, 130))
  elif place == 'at a party':  # lights
    for k in range(4, size, max(6, size // 6)):
      draw.ellipse([k, 2, k + 3, 5], fill=(250, 250, 180))


def _draw_object(draw, size: int, name: str, x: float) -> list[float]:
  s = size / 8
  y = size * 0.05
  if name == 'tv':
    box = [x, y, x + 1.6 * s, y + s]
    draw.rectangle(box, fill=(10, 10, 10))
    draw.rectangle([box[0] + 2, box[1] + 2, box[2] - 2, box[3] - 2], fill=(90, 140, 200))
  else:  # clock
    box = [x, y, x + s, y + s]
    draw.ellipse(box, fill=(245, 245, 245), outline=(0, 0, 0))
  return box


def _polygon(box: list[float]) -> list[list[list[float]]]:
  x1, y1, x2, y2 = box
  return [[[x1, y1], [x2, y1], [x2, y2], [x1, y2]]]


def _features(img: np.ndarray, boxes: list[list[float]], proj: np.ndarray) -> dict[str, np.ndarray]:
  """Projected 8x8 thumbnails: image (2048,), boxes (N, 2048), float32."""

  def thumb(x1, y1, x2, y2):
    crop = Image.fromarray(
      img[
        int(y1) : max(int(y1) + 1, int(np.ceil(y2))), int(x1) : max(int(x1) + 1, int(np.ceil(x2)))
      ]
    )
    t = np.asarray(crop.resize((8, 8), Image.BILINEAR), np.float32) / 255.0
    return t.reshape(-1) - 0.5

  h, w = img.shape[:2]
  whole = thumb(0, 0, w, h) @ proj
  objs = (
    np.stack([thumb(*b) @ proj for b in boxes]) if boxes else np.zeros((0, FEATURE_DIM), np.float32)
  )
  return {
    'image_features': np.maximum(whole, 0).astype(np.float32),
    'object_features': np.maximum(objs, 0).astype(np.float32),
  }


# --------------------------------------------------------------- records
def _make_image(rng: np.random.Generator, size: int) -> dict[str, Any]:
  """Samples and draws one image; returns image, metadata and attributes."""
  place = list(PLACES)[rng.integers(len(PLACES))]
  n_people = int(rng.integers(2, 5))
  n_objects = int(rng.integers(0, 3))
  img = Image.new('RGB', (size, size))
  draw = ImageDraw.Draw(img)
  _draw_background(draw, size, place)
  people, geometry = [], []
  slot = size / n_people
  for k in range(n_people):
    attrs = dict(
      colour=list(COLOURS)[rng.integers(4)],
      object=OBJECTS[rng.integers(4)],
      pose=POSES[rng.integers(3)],
    )
    h = size * rng.uniform(0.5, 0.6)
    cx = slot * (k + 0.5) + rng.uniform(-0.08, 0.08) * slot
    foot = size * rng.uniform(0.9, 0.97)
    geometry.append((cx, foot, h, attrs['colour'], attrs['object'], attrs['pose']))
    people.append(dict(name='person', **attrs))
  for part in ('body', 'object'):
    for person, geo in zip(people, geometry):
      person['box'] = _draw_person(draw, *geo, part=part)
  objects = []
  for k in range(n_objects):
    name = ('tv', 'clock')[rng.integers(2)]
    x = size * (0.05 + 0.5 * k) + rng.uniform(0, size * 0.2)
    objects.append(dict(name=name, box=_draw_object(draw, size, name, x)))
  dets = people + objects
  order = rng.permutation(len(dets))  # detector order mixes classes
  dets = [dets[i] for i in order]
  for d in dets:
    d['box'] = [float(np.clip(v, 0, size - 1)) for v in d['box']]
  meta = {
    'boxes': [d['box'] + [round(float(rng.uniform(0.8, 1.0)), 4)] for d in dets],
    'names': [d['name'] for d in dets],
    'segms': [_polygon(d['box']) for d in dets],
    'width': size,
    'height': size,
  }
  return dict(image=img, place=place, dets=dets, meta=meta)


def _fill(template: str, s: int, o: int, x: int, place: str) -> str:
  return template.format(s=s, o=o, x=x, p=PLACES[place][0])


def _events(
  rng: np.random.Generator, im: dict[str, Any], blind: bool, p_no_intent: float
) -> list[dict[str, Any]]:
  """Two events per image with inferences from the subject's attributes."""
  tags = [i + 1 for i, d in enumerate(im['dets']) if d['name'] == 'person']
  subjects = rng.choice(tags, size=2, replace=False)
  out = []
  for s in subjects:
    s = int(s)
    others = [t for t in tags if t != s]
    o = int(rng.choice(others))
    x = int(rng.choice(others))
    attrs = im['dets'][s - 1]
    template = int(rng.integers(len(EVENTS)))
    event = _fill(EVENTS[template], s, o, x, im['place'])
    rec = dict(place=im['place'], event=event)
    if not blind:

      def pick(pool, k, s=s, o=o, x=x):
        idx = rng.choice(len(pool), size=k, replace=False)
        # Some annotators end with a period (as in the real data).
        return [
          _fill(pool[i], s, o, x, im['place']) + ('.' if rng.uniform() < 0.15 else '')
          for i in sorted(idx)
        ]

      n_intent = 0 if rng.uniform() < p_no_intent else 2
      rec['intent'] = pick(INTENT[attrs['object']], n_intent)
      rec['before'] = pick(BEFORE[attrs['colour']], 4)
      rec['after'] = pick(AFTER[attrs['pose']], 4)
    out.append(
      (
        rec,
        dict(
          subject=s,
          other=o,
          template=template,
          **{k: attrs[k] for k in ('colour', 'object', 'pose')},
        ),
      )
    )
  return out


def _write_json(path: str, obj: Any) -> None:
  with open(path, 'w') as f:
    json.dump(obj, f, indent=None)


def generate(
  out: str,
  seed: int = 0,
  train_images: int = 120,
  val_images: int = 30,
  test_images: int = 15,
  image_size: int = 128,
  features: bool = True,
  vocab_size: int = 600,
  overwrite: bool = False,
  verbose: bool = True,
) -> dict[str, Any]:
  """Writes the synthetic corpus to `out` (see module docstring).

  Args:
    out: output directory; must not exist unless `overwrite`.
    seed: everything is a deterministic function of it.
    train_images, val_images, test_images: images per split (2 events each).
    image_size: square image side in pixels.
    features: also write the per-image feature pickles.
    vocab_size: BPE base vocabulary size (incl. bytes and `<|endoftext|>`).
    overwrite: replace an existing `out`.
    verbose: print the statistics.

  Returns:
    The statistics dict (also written to `out/stats.json`).
  """
  out = os.path.abspath(out)
  if os.path.exists(out) and not overwrite:
    raise FileExistsError(f'{out} exists (pass overwrite=True / --overwrite)')
  parent = os.path.dirname(out)
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(dir=parent, prefix='.tmp_synthetic_commonsense_')
  try:
    proj = np.random.default_rng([seed, 99]).standard_normal((8 * 8 * 3, FEATURE_DIM)).astype(
      np.float32
    ) / np.sqrt(192.0)
    truth, annots, event_truth, probe = {}, {}, {}, {}
    splits = (('train', train_images), ('val', val_images), ('test', test_images))
    for split_idx, (split, n_img) in enumerate(splits):
      rng = np.random.default_rng([seed, split_idx])
      records, event_truth[split], probe[split] = [], [], []
      for i in range(n_img):
        movie = f'synth_movie_{split_idx}{i // 10:03d}'
        stem = f'synth_{split}_{i:05d}@0'
        img_fn = f'{movie}/{stem}.jpg'
        meta_fn = f'{movie}/{stem}.json'
        im = _make_image(rng, image_size)
        d = os.path.join(tmp, 'vcr1images', movie)
        os.makedirs(d, exist_ok=True)
        im['image'].save(os.path.join(tmp, 'vcr1images', img_fn), quality=95)
        _write_json(os.path.join(tmp, 'vcr1images', meta_fn), im['meta'])
        if features:
          os.makedirs(os.path.join(tmp, 'features'), exist_ok=True)
          arr = np.asarray(im['image'])
          feats = _features(arr, [b[:4] for b in im['meta']['boxes']], proj)
          with open(os.path.join(tmp, 'features', stem + '.pkl'), 'wb') as f:
            pickle.dump(feats, f, protocol=2)
          probe[split] += [
            (feats['object_features'][k], det)
            for k, det in enumerate(im['dets'])
            if det['name'] == 'person'
          ]
        events = _events(rng, im, blind=(split == 'test'), p_no_intent=0.1)
        truth[img_fn] = dict(
          place=im['place'],
          detections=[{k: v for k, v in det.items() if k != 'box'} for det in im['dets']],
          events=[e[1] for e in events],
        )
        for rec, ev_truth in events:
          event_truth[split].append(ev_truth)
          records.append(dict(img_fn=img_fn, movie=movie, metadata_fn=meta_fn, split=split, **rec))
      annots[split] = records
      _write_json(os.path.join(tmp, f'{split}_annots.json'), records)
    _write_json(os.path.join(tmp, 'truth.json'), truth)
    tok = tokenizer_lib.train_bpe(
      tokenizer_lib.corpus_pieces(_texts(annots['train'])),
      os.path.join(tmp, 'tokenizer'),
      vocab_size=vocab_size,
    )
    stats = corpus_statistics(annots, truth, event_truth, tok)
    if features:
      stats['feature_probe_accuracy'] = _probe_accuracy(probe)
    _write_json(os.path.join(tmp, 'stats.json'), stats)
    if os.path.exists(out):
      shutil.rmtree(out)
    os.replace(tmp, out)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  if verbose:
    print_statistics(stats)
    print(f'wrote {out}')
  return stats


def _texts(records: list[dict[str, Any]]) -> list[str]:
  """The strings the tokenizer sees: mapped events, places, inferences."""
  out = []
  for idx, rec in enumerate(records):
    _, ev = person_tags.map_numbers_to_det_tokens(rec['event'])
    out += [ev, rec['place']]
    for r in person_tags.encode_finetune_record(rec, idx):
      out.append(r['inference_text_name'])
  return out


# ------------------------------------------------------------- statistics
def corpus_statistics(
  annots: dict[str, list],
  truth: dict[str, Any],
  event_truth: dict[str, list],
  tok: tokenizer_lib.VisualCometTokenizer,
) -> dict:
  """Corpus statistics (paper Table 4 style) and text-only predictability.

  `text_only_attribute_accuracy` measures how well the attribute that selects
  each relation's template pool (held object / clothing colour / pose of the
  subject) can be predicted from the event template + place alone: the
  majority attribute per (template, place) on train, scored on val. The image
  determines it exactly (accuracy 1).
  """
  stats = {}
  for split, recs in annots.items():
    imgs = {r['img_fn'] for r in recs}
    s = dict(images=len(imgs), events=len(recs))
    for rel in ('intent', 'before', 'after'):
      n = [len(r.get(rel, [])) for r in recs]
      s[f'{rel}_per_event'] = float(np.mean(n)) if n else 0.0
      s[f'{rel}_empty_events'] = int(sum(1 for r in recs if rel in r and not r[rel]))
    infs = [t for r in recs for rel in ('intent', 'before', 'after') for t in r.get(rel, [])]
    s['inferences'] = len(infs)
    s['unique_inferences'] = len(set(infs))
    s['people_per_image'] = float(
      np.mean([sum(d['name'] == 'person' for d in truth[i]['detections']) for i in imgs])
    )
    s['detections_per_image'] = float(np.mean([len(truth[i]['detections']) for i in imgs]))
    s['persons_mentioned_per_event'] = float(
      np.mean(
        [
          len(person_tags.tag_numbers(person_tags.map_numbers_to_det_tokens(r['event'])[0]))
          for r in recs
        ]
      )
    )
    s['persons_mentioned_per_inference'] = (
      float(
        np.mean(
          [len(person_tags.tag_numbers(person_tags.map_numbers_to_det_tokens(t)[0])) for t in infs]
        )
      )
      if infs
      else 0.0
    )
    s['words_per_event'] = float(np.mean([len(r['event'].split()) for r in recs]))
    s['words_per_place'] = float(np.mean([len(r['place'].split()) for r in recs]))
    s['words_per_inference'] = float(np.mean([len(t.split()) for t in infs])) if infs else 0.0
    stats[split] = s
  # Token lengths of the official fields (for the fixed-width layout).
  tr = annots['train']
  ev_len = [
    len(
      tok.encode(
        ' '.join(
          [
            tokenizer_lib.B_EV,
            person_tags.map_numbers_to_det_tokens(r['event'])[1],
            tokenizer_lib.E_EV,
          ]
        )
      )
    )
    for r in tr
  ]
  pl_len = [
    len(tok.encode(' '.join([tokenizer_lib.B_PL, r['place'], tokenizer_lib.E_PL]))) for r in tr
  ]
  inf_len = [
    len(tok.encode(' '.join(['<|intent|>', r['inference_text_name'], tokenizer_lib.E_IN])))
    for i, rec in enumerate(tr)
    for r in person_tags.encode_finetune_record(rec, i)
  ]
  stats['tokens'] = dict(
    bpe_base_vocab=tok.base_vocab_size,
    vocab_with_specials=tok.vocab_size,
    max_event=max(ev_len),
    max_place=max(pl_len),
    max_inference=max(inf_len),
  )
  stats['text_only_attribute_accuracy'] = _text_only_accuracy(annots, event_truth)
  return stats


def _text_only_accuracy(annots, event_truth) -> dict[str, float]:
  def rows(split):
    for r, e in zip(annots[split], event_truth[split]):
      yield (e['template'], r['place']), e

  out = {}
  for rel, attr in (('intent', 'object'), ('before', 'colour'), ('after', 'pose')):
    counts = {}
    for key, e in rows('train'):
      counts.setdefault(key, {}).setdefault(e[attr], 0)
      counts[key][e[attr]] += 1
    overall = {}
    for c in counts.values():
      for a, n in c.items():
        overall[a] = overall.get(a, 0) + n
    fallback = max(sorted(overall), key=overall.get)
    hits = [
      e[attr] == (max(sorted(counts[key]), key=counts[key].get) if key in counts else fallback)
      for key, e in rows('val')
    ]
    out[rel] = float(np.mean(hits)) if hits else 0.0
  return out


def _probe_accuracy(probe) -> dict[str, float]:
  """Linear (ridge, one-vs-all) probe on person box features: train -> val.

  Shows that the attributes that select the inferences are recoverable from
  the visual input (here the stand-in features; the pixels are the same).
  """
  x = np.stack([f for f, _ in probe['train']]).astype(np.float64)
  xv = np.stack([f for f, _ in probe['val']]).astype(np.float64)
  mu, sd = x.mean(0), x.std(0) + 1e-6
  x, xv = (x - mu) / sd, (xv - mu) / sd
  out = {}
  for attr in ('colour', 'object', 'pose'):
    y = [d[attr] for _, d in probe['train']]
    classes = sorted(set(y))
    t = np.array([[c == v for c in classes] for v in y], np.float64)
    # Dual ridge: few samples, many features.
    alpha = np.linalg.solve(x @ x.T + 10.0 * np.eye(len(x)), t)
    pred = (xv @ x.T @ alpha).argmax(1)
    out[attr] = float(np.mean([classes[p] == d[attr] for p, (_, d) in zip(pred, probe['val'])]))
  return out


def print_statistics(stats: dict) -> None:
  """Prints the statistics as a table."""
  keys = [k for k in stats['train']]
  print(f"{'statistic':34s}" + ''.join(f'{s:>10s}' for s in ('train', 'val', 'test')))
  for k in keys:
    vals = [stats[s][k] for s in ('train', 'val', 'test')]
    print(f'{k:34s}' + ''.join(f'{v:10.2f}' if isinstance(v, float) else f'{v:10d}' for v in vals))
  print('tokens:', json.dumps(stats['tokens']))
  acc = stats['text_only_attribute_accuracy']
  print(
    'attribute accuracy from event+place text only (val; image gives '
    '1.00): ' + ', '.join(f'{k} {v:.2f}' for k, v in acc.items())
  )
  if 'feature_probe_accuracy' in stats:
    print(
      'attribute accuracy from the person box features (val, ridge '
      'probe): ' + ', '.join(f'{k} {v:.2f}' for k, v in stats['feature_probe_accuracy'].items())
    )


def main(argv=None) -> None:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--out', required=True)
  p.add_argument('--seed', type=int, default=0)
  p.add_argument('--train_images', type=int, default=120)
  p.add_argument('--val_images', type=int, default=30)
  p.add_argument('--test_images', type=int, default=15)
  p.add_argument('--image_size', type=int, default=128)
  p.add_argument('--vocab_size', type=int, default=600)
  p.add_argument('--no_features', action='store_true')
  p.add_argument('--overwrite', action='store_true')
  a = p.parse_args(argv)
  generate(
    a.out,
    seed=a.seed,
    train_images=a.train_images,
    val_images=a.val_images,
    test_images=a.test_images,
    image_size=a.image_size,
    features=not a.no_features,
    vocab_size=a.vocab_size,
    overwrite=a.overwrite,
  )


if __name__ == '__main__':
  main()
