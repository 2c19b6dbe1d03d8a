"""VisualCOMET generator (GPT-2 + visual slots) and the paper's Table 2 rows.

Run (paper scale; the official release unpacked under $VC, GPT-2 small's
`model.safetensors` + `config.json` + tokenizer files under $GPT2):
  python -m relations.train --config configs/commonsense.py:small \
      --config.data.manual_dir=$VC --config.data.tokenizer_dir=$GPT2 \
      --config.model.init_from=$GPT2/model.safetensors --workdir /tmp/vc_small
  python -m relations.predict --config configs/commonsense.py:small \
      --config.data.manual_dir=$VC --workdir /tmp/vc_small --eval val
  python -m relations.evaluate commonsense --annotations $VC/val_annots.json \
      --generations /tmp/vc_small/eval/val/step_<N>/val_sample_1_num_5_top_k_0_top_p_0.9.json \
      --train-annotations $VC/train_annots.json
Tiny (synthetic demo): `relations.commonsense.demo.run_demo(workdir)`.

Arg keys (`configs/commonsense.py:variant=small,inputs=image_event_place,pg=true`):
  variant     tiny | small (GPT-2 124M) | medium | large; the first bare
              word also sets it (`:small`).
  inputs      Table 2 modality: none (the "No Input" row: no image slots, event
              and place eos padding) | place | event | event_place | image |
              image_place | image_event | image_event_place (default).
  pg          person grounding (`<|detN|>` added to the person slots).
  ep          EP loss (also predict the event and place spans).
  text_given  False = evaluate without event/place text (the paper's
              "no text given" rows; training still sees the text).
  visual      features (released 2048-d, default) | vit (shared ViT +
              RoI-Align over its patch grid).
  faithful    official attention (no mask over padding) instead of ours.
  target      inference (default) | event_place: Table 6's "Image -> Event + Place" (the event
              and place spans are the only targets; its evaluator generates and scores them).
  seq_len     whole-sequence width (layout.max_seq_len); 0 = the variant's default: 128 for the
              paper variants, as the official code and its README command (`--max_seq_len 128`)
              and released checkpoint use; `seq_len=256` is the paper's stated value (seed 003,
              Sec. 6.1). The official segments fill at most 17 + 39 + 22 + 1 + 23 = 102
              positions, so 256 only adds trailing padding (more compute; with `faithful`, whose
              attention sees padding, slightly different activations).

`get_hyper("table2")` lists the 16 Table 2 rows as arg strings (`relations.sweep` runs them,
`relations.report` tabulates them in the paper's layout).
"""

import common  # configs/common.py
import ml_collections

from relations.train import config_util

INPUTS = (
  "none",
  "place",
  "event",
  "event_place",
  "image",
  "image_place",
  "image_event",
  "image_event_place",
)

# The 16 model rows of the paper's Table 2 in its order: (Modalities, Text Given, config arg).
# "Text Given: No" rows train like their "Yes" twin and withhold event and place at test time
# (`text_given=false`); rows without text inputs see none at either time.
TABLE2 = (
  ("Place", "Yes", "inputs=place,pg=false"),
  ("Event", "Yes", "inputs=event,pg=false"),
  ("Event + Place", "Yes", "inputs=event_place,pg=false"),
  ("Image + Place", "Yes", "inputs=image_place,pg=false"),
  ("Image + Event", "Yes", "inputs=image_event,pg=false"),
  ("Image + Event + Place", "Yes", "inputs=image_event_place,pg=false"),
  ("Image + Event + Place + EP Loss", "Yes", "inputs=image_event_place,pg=false,ep=true"),
  ("Image + Event + Place + PG", "Yes", "inputs=image_event_place,pg=true"),
  ("Image + Event + Place + PG + EP Loss", "Yes", "inputs=image_event_place,pg=true,ep=true"),
  ("No Input", "No", "inputs=none,pg=false"),
  ("Image", "No", "inputs=image,pg=false"),
  ("Image + PG", "No", "inputs=image,pg=true"),
  ("Image + Event + Place", "No", "inputs=image_event_place,pg=false,text_given=false"),
  (
    "Image + Event + Place + EP Loss",
    "No",
    "inputs=image_event_place,pg=false,ep=true,text_given=false",
  ),
  ("Image + Event + Place + PG", "No", "inputs=image_event_place,pg=true,text_given=false"),
  (
    "Image + Event + Place + PG + EP Loss",
    "No",
    "inputs=image_event_place,pg=true,ep=true,text_given=false",
  ),
)
HYPERS = {"table2": TABLE2}


def get_hyper(arg=None):
  """Arg strings of ablation `arg` (default "table2": the 16 model rows of Table 2, in order).

  Rows carry no variant: `python -m relations.sweep --config configs/commonsense.py:tiny
  --hyper table2` prepends the config's own arg, so tiny and paper sweeps are the same list.
  """
  name = arg or "table2"
  if name not in HYPERS:
    raise ValueError(f"Unknown hyper {name!r}; available: {', '.join(HYPERS)}")
  return [row for _, _, row in HYPERS[name]]


def describe_row(row):
  """The paper's label columns of a `get_hyper` row: {"Modalities": ..., "Text Given": ...}."""
  for modalities, text_given, arg in TABLE2:
    if arg == row:
      return {"Modalities": modalities, "Text Given": text_given}
  return {}


def get_config(arg=None):
  arg = config_util.parse_arg(
    arg,
    variant="small",
    inputs="image_event_place",
    pg=True,
    ep=False,
    text_given=True,
    visual="features",
    faithful=False,
    seq_len=0,
    target="inference",
  )
  if arg.inputs not in INPUTS:
    raise ValueError(f"Config arg 'inputs': unknown {arg.inputs!r} ({', '.join(INPUTS)})")
  if arg.visual not in ("features", "vit"):
    raise ValueError(f"Config arg 'visual': unknown {arg.visual!r} (features, vit)")
  if arg.target not in ("inference", "event_place"):
    raise ValueError(f"Config arg 'target': unknown {arg.target!r} (inference, event_place)")
  if arg.seq_len < 0:
    raise ValueError(f"Config arg 'seq_len': must be >= 0 (0 = default), got {arg.seq_len}")
  if arg.variant not in ("tiny", "small", "medium", "large", "xl"):  # gpt2.SIZES
    raise ValueError(
      f"Config arg 'variant': unknown {arg.variant!r} (tiny, small, medium, large, xl)"
    )
  tiny = arg.variant == "tiny"
  c = ml_collections.ConfigDict()
  c.task = "commonsense"
  c.seed = 42
  c.data = dict(
    data_dir="/tmp/tfds_relations",  # TFDS data_dir
    manual_dir="",  # official release (records.py)
    tokenizer_dir="",  # vocab.json+merges.txt; "" = manual_dir/tokenizer
    train_split="train",
    image_size=224,  # ViT input (visual=vit)
  )
  parts = arg.inputs.split("_")  # "none" sets no part
  c.inputs = dict(image="image" in parts, event="event" in parts, place="place" in parts)
  # The official layout.
  c.layout = dict(num_max_boxes=15, max_event=39, max_place=22, max_inference=23, max_seq_len=128)
  c.model = dict(
    lm_variant="tiny" if tiny else arg.variant,
    lm=dict(vocab_size=0, dropout=0.1),  # 0 = the tokenizer's size
    visual=arg.visual,
    vit=dict(variant="B/16", posemb_grid=(14, 14)),
    roi_samples=4,
    person_grounding=arg.pg,
    subject_ids=True,
    attention_mask=not arg.faithful,
    visual_dropout=0.1,
    slot_scale_init=1.0,  # official LayerNorm init
    init_from="",  # HF GPT-2 model.safetensors
  )
  # target=event_place (Table 6 row 1): image in, event and place out (their spans are the only
  # targets); `relations.commonsense.pipeline` feeds its generations to an inference model.
  event_place = arg.target == "event_place"
  c.loss = dict(mode="all" if arg.ep or event_place else "inference", target=arg.target)
  # num_workers: grain worker processes (~1,000 examples/s per v4 chip;
  # features: several thousand per core; visual=vit decodes the image table's
  # 256-px copy, ~1,000 per core: bench/input_pipeline.py).
  c.input = dict(batch_size=64, num_threads=2, num_workers=1 if arg.visual == "features" else 4)
  # Official: AdamW lr 5e-5, eps 1e-8, no weight decay, linear decay to 0,
  # no warm-up, clip 1.0; 5 epochs at batch 64 (~80k steps).
  common.trainer(
    c,
    total_steps=80_000,
    lr=5e-5,
    warmup_steps=0,
    decay="linear",
    weight_decay=0.0,
    clip_norm=1.0,
    checkpoint_every=10_000,
    log_every=100,
  )
  c.evals = ml_collections.ConfigDict()
  c.evals.val = dict(
    type="commonsense",
    every_steps=0,
    split="val",
    text_given=arg.text_given,
    method="sample",
    num_samples=5,
    top_p=0.9,
    top_k=0,
    temperature=1.0,
    max_new_tokens=20,
    batch_size=32,
    length_penalty=1.0,
    early_stopping=False,  # method="beam" only (HF conventions)
    max_records=0,  # 0 = all (event, relation) pairs
    meteor=True,
    meteor_workers=0,  # 0 = one METEOR process per core
    acc50=True,
    acc50_seed=0,
    acc50_candidates="",  # "" = seeded, saved
    acc50_batch_size=4,  # queries (x 50 candidates) per call
    acc50_max_queries=0,  # 0 = all; >0 = first N (quick)
  )
  # The blind test split (no references): `relations.predict --eval test` writes the leaderboard
  # submission and scores nothing; never run during training nor by a bare `relations.predict`.
  c.evals.test = dict(c.evals.val.to_dict(), split="test", acc50=False, during_training=False)
  if tiny:
    c.data.data_dir = "/tmp/tfds_relations_tiny"
    c.data.image_size = 64
    c.layout = dict(num_max_boxes=8, max_event=10, max_place=7, max_inference=12, max_seq_len=40)
    c.model.lm = dict(vocab_size=0, dropout=0.1, max_len=64)
    # From scratch, token embeddings are N(0, 0.02): start slots at that
    # scale so the <|detN|> grounding added to them is not drowned.
    c.model.slot_scale_init = 0.02
    c.model.vit = dict(
      width=64, depth=2, mlp_dim=128, num_heads=2, patch_size=8, posemb_grid=(8, 8)
    )
    c.input = dict(batch_size=32, num_threads=2)
    common.trainer(
      c,
      total_steps=300,
      lr=2e-3,
      warmup_steps=20,
      decay="linear",
      weight_decay=0.0,
      clip_norm=1.0,
      checkpoint_every=300,
      log_every=50,
    )
    c.evals.val.update(max_new_tokens=12, batch_size=64, acc50_batch_size=16)
    c.evals.test.update(max_new_tokens=12, batch_size=64)
  if event_place:
    # Its evaluator generates events and places and scores them (Table 6); no inference evals.
    val = c.evals.val
    c.evals = ml_collections.ConfigDict()
    c.evals.val = dict(
      type="relations.commonsense.event_place",
      every_steps=0,
      split="val",
      top_p=val.top_p,
      num_samples=1,
      batch_size=val.batch_size,
      max_records=0,  # 0 = all events
      meteor=True,
    )
  if arg.seq_len:
    lay = c.layout
    # The prompt (image, event, place, relation) plus one inference token must fit.
    need = lay.num_max_boxes + 2 + lay.max_event + lay.max_place + 2
    if arg.seq_len < need:
      raise ValueError(
        f"Config arg 'seq_len': {arg.seq_len} is shorter than this layout's prompt plus one "
        f"token ({need})"
      )
    lay.max_seq_len = arg.seq_len
    if tiny:  # its from-scratch LM has only max_len positions
      c.model.lm.max_len = max(c.model.lm.max_len, arg.seq_len)
  return c
