"""Nucleus-sampling speed: ours (JAX, jitted, KV cache) vs HF `generate`.

Both decode the same randomly initialised GPT-2-small-sized model (written once
to a temporary `model.safetensors` by `transformers` and imported into ours)
with the official settings: top_p 0.9, top_k 0, temperature 1, 5 samples per
prompt, 79-token prompts (the VisualCOMET prompt width), 20 new tokens (no
early stop, so both produce exactly the same number of tokens). One untimed
warm-up call each (compilation for JAX, allocator warm-up for torch), then
`--repeats` timed calls; prints tokens/s of both and the ratio.

Ours prefills each prompt once and its 5 samples attend to that one copy of
its keys/values (`generation.decode`); `generate` expands every prompt to its
5 return sequences before the prefill. The load average is printed before and
after (the figure is only meaningful on a quiet machine), and a digest of our
sampled ids so that two versions can be checked to sample the same tokens.

  python bench/commonsense_decode.py [--prompts 8] [--repeats 1]
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from relations.commonsense.generation import decode  # pylint: disable=g-import-not-at-top
from relations.commonsense import gpt2
from relations.commonsense import gpt2_import


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--prompts", type=int, default=8)
  ap.add_argument("--prompt_len", type=int, default=79)
  ap.add_argument("--new_tokens", type=int, default=20)
  ap.add_argument("--samples", type=int, default=5)
  ap.add_argument("--repeats", type=int, default=1)
  args = ap.parse_args()
  uptime = lambda: subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
  print("uptime before:", uptime())

  import torch  # pylint: disable=g-import-not-at-top
  import transformers  # pylint: disable=g-import-not-at-top

  torch.manual_seed(0)
  hf_cfg = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257)
  hf = transformers.GPT2LMHeadModel(hf_cfg).eval()
  tmp = tempfile.mkdtemp()
  hf.save_pretrained(tmp)

  lm = gpt2.GPT2(**gpt2_import.read_hf_config(tmp), vocab_size=50257, dropout=0.0)
  shapes = jax.eval_shape(lm.init, jax.random.PRNGKey(0), jnp.zeros((1, 4), jnp.int32))["params"]
  params = jax.device_put(gpt2_import.load(shapes, os.path.join(tmp, "model.safetensors")))
  params = jax.tree.map(
    lambda x: x.value if hasattr(x, "value") else x, params, is_leaf=lambda x: hasattr(x, "value")
  )

  prompts = (
    np.random.default_rng(0).integers(0, 50256, (args.prompts, args.prompt_len)).astype(np.int32)
  )
  n_tok = args.prompts * args.samples * args.new_tokens

  cfg = decode.SampleConfig(
    num_samples=args.samples,
    max_new_tokens=args.new_tokens,
    top_p=0.9,
    top_k=0,
    temperature=1.0,
    stop_id=-1,
    pad_id=50256,
  )
  fn = decode.make_sample_fn(decode.LMDecoder(lm), cfg)
  inputs = {"tokens": jnp.asarray(prompts)}
  fn(params, inputs, jax.random.PRNGKey(0)).block_until_ready()
  t0 = time.perf_counter()
  for r in range(args.repeats):
    out = fn(params, inputs, jax.random.PRNGKey(r + 1)).block_until_ready()
    if r == 0:
      out_first = out
  ours = (time.perf_counter() - t0) / args.repeats
  assert out.shape == (args.prompts, args.samples, args.new_tokens)

  ids = torch.tensor(prompts, dtype=torch.long)
  kw = dict(
    attention_mask=torch.ones_like(ids),
    do_sample=True,
    top_p=0.9,
    top_k=0,
    temperature=1.0,
    max_new_tokens=args.new_tokens,
    min_new_tokens=args.new_tokens,
    num_return_sequences=args.samples,
    pad_token_id=50256,
  )
  with torch.inference_mode():
    hf.generate(ids, **kw)
    t0 = time.perf_counter()
    for _ in range(args.repeats):
      ref = hf.generate(ids, **kw)
  theirs = (time.perf_counter() - t0) / args.repeats
  assert ref.shape == (args.prompts * args.samples, args.prompt_len + args.new_tokens)

  print(
    f"setting: GPT-2 small (124M), {args.prompts} prompts x "
    f"{args.samples} samples, prompt {args.prompt_len}, "
    f"{args.new_tokens} new tokens, top_p 0.9, CPU threads: "
    f"torch {torch.get_num_threads()}, devices {jax.devices()[0].platform}"
  )
  print(f"ours (JAX)             : {n_tok / ours:9.1f} tokens/s ({ours:.3f} s/call)")
  print(f"transformers generate  : {n_tok / theirs:9.1f} tokens/s ({theirs:.3f} s/call)")
  print(
    "our samples (ids, key 1) sha1:", hashlib.sha1(np.asarray(out_first).tobytes()).hexdigest()[:16]
  )
  print("uptime after :", uptime())
  print(f"ratio ours / transformers: {theirs / ours:.2f}x")


if __name__ == "__main__":
  main()
