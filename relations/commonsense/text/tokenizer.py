"""VisualCOMET tokenizer: GPT-2 byte-level BPE plus the official special tokens.

The BPE itself is the `tokenizers` library (`models.BPE` with the byte-level
pre-tokenizer, `add_prefix_space=False`). On top of it this module reproduces
what the official `VisualCometTokenizer` (a transformers 2.4.1 `GPT2Tokenizer`)
does with the added tokens:

* Special tokens are appended to the base vocabulary in the official order
  (`SPECIAL_TOKENS`): with GPT-2's 50,257 entries, `<|b_img|>` = 50257 ..
  `<|after|>` = 50266, `<|det0|>` = 50267 .. `<|det49|>` = 50316; vocabulary
  size 50,317. `<|endoftext|>` (the last base id, 50256 for GPT-2) is unk, bos,
  eos and pad.
* `tokenize` splits the text on the added tokens and on `<|endoftext|>`, strips
  every piece and BPE-encodes the pieces separately, so the first word after a
  special token has no leading "Ġ" (`<|b_ev|> <|det1|> is trying` ->
  `<|b_ev|>`, `<|det1|>`, `is`, `Ġtrying`). This is transformers 2.4.1
  behaviour and is what the released checkpoint saw in training.
* `decode` joins byte-level runs and added tokens with a space and applies
  2.4.1's `clean_up_tokenization`, then VisualCOMET's removal of structural
  tokens; `decode_generation` is the official generation post-processing.

GPT-2's files cannot be downloaded on these machines, so `train_bpe` trains a
byte-level BPE on a text corpus (the synthetic data) and writes it in GPT-2's
file format (`vocab.json` with `<|endoftext|>` as the last base id, and
`merges.txt`); the same special tokens are appended after its base vocabulary
at load time.
"""

import json
import os
import re
import tempfile
from typing import Iterable, Optional, Sequence

import tokenizers
from tokenizers import decoders
from tokenizers import models
from tokenizers import pre_tokenizers
from tokenizers import trainers

from relations.commonsense.text import person_tags

EOS = '<|endoftext|>'
B_IMG, E_IMG = '<|b_img|>', '<|e_img|>'
B_EV, E_EV = '<|b_ev|>', '<|e_ev|>'
B_PL, E_PL = '<|b_pl|>', '<|e_pl|>'
E_IN = '<|e_in|>'
# Official `begin_inferences` dict order: before, intent, after.
RELATION_TOKENS = {'before': '<|before|>', 'intent': '<|intent|>', 'after': '<|after|>'}
# Order of `add_special_tokens` in the official tokenizer (ids base_vocab..).
SPECIAL_TOKENS = (
  (B_IMG, E_IMG, B_EV, E_EV, B_PL, E_PL, E_IN)
  + tuple(RELATION_TOKENS.values())
  + tuple(person_tags.det_token(i) for i in range(person_tags.NUM_DET_TOKENS))
)
# Structural tokens replaced by spaces in `decode(skip_special_tokens=True)`
# (official list: note that `<|b_pl|>` and the det tokens are not in it).
_TOKENS_TO_REMOVE = (B_IMG, E_IMG, B_EV, E_EV, E_PL, E_IN, EOS) + tuple(RELATION_TOKENS.values())


def bytes_to_unicode() -> dict[int, str]:
  """GPT-2's reversible byte -> printable unicode character table."""
  keep = (
    list(range(ord('!'), ord('~') + 1))
    + list(range(ord('\xa1'), ord('\xac') + 1))
    + list(range(ord('\xae'), ord('\xff') + 1))
  )
  table, extra = {}, 0
  for b in range(256):
    if b in keep:
      table[b] = chr(b)
    else:
      table[b] = chr(256 + extra)
      extra += 1
  return table


_BYTE_DECODER = {c: b for b, c in bytes_to_unicode().items()}


def clean_up_tokenization(text: str) -> str:
  """transformers 2.4.1 `clean_up_tokenization` (space before punctuation)."""
  return (
    text.replace(' .', '.')
    .replace(' ?', '?')
    .replace(' !', '!')
    .replace(' ,', ',')
    .replace(" ' ", "'")
    .replace(" n't", "n't")
    .replace(" 'm", "'m")
    .replace(' do not', " don't")
    .replace(" 's", "'s")
    .replace(" 've", "'ve")
    .replace(" 're", "'re")
  )


# Strings memoised by `VisualCometTokenizer.encode` (a few MB at most).
_ENCODE_CACHE = 50_000


class VisualCometTokenizer:
  """Byte-level BPE + VisualCOMET special tokens (see module docstring).

  Attributes:
    base_vocab_size: size of the BPE vocabulary including `<|endoftext|>`
      (50,257 for GPT-2).
    vocab_size: base_vocab_size + 60 (50,317 for GPT-2).
    eos_id: id of `<|endoftext|>`; also unk, bos and the padding id.
    pad_id: same as eos_id.
    b_img_id, e_img_id, b_ev_id, e_ev_id, b_pl_id, e_pl_id, e_in_id: ids of
      the structural special tokens.
    relation_ids: {'before'|'intent'|'after': id of the relation token}.
  """

  def __init__(self, tok: tokenizers.Tokenizer):
    """Wraps a byte-level BPE `tokenizers.Tokenizer` without special tokens.

    Args:
      tok: the base tokenizer; its vocabulary must contain `<|endoftext|>`.
        The special tokens are appended here.

    Raises:
      ValueError: `<|endoftext|>` missing, or the special tokens did not get
        consecutive ids after the base vocabulary.
    """
    self._tok = tok
    self.base_vocab_size = tok.get_vocab_size(with_added_tokens=False)
    if tok.token_to_id(EOS) is None:
      raise ValueError(f'BPE vocabulary has no {EOS} token.')
    tok.add_special_tokens([EOS] + list(SPECIAL_TOKENS))
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    want = list(range(self.base_vocab_size, self.base_vocab_size + len(SPECIAL_TOKENS)))
    if ids != want:
      raise ValueError(
        'Special tokens must get ids base_vocab_size.. in the '
        f'official order; got {ids[:3]}... (vocabulary already '
        'contains some of them?)'
      )
    self.vocab_size = self.base_vocab_size + len(SPECIAL_TOKENS)
    self.eos_id = self.pad_id = tok.token_to_id(EOS)
    self.b_img_id = self.token_to_id(B_IMG)
    self.e_img_id = self.token_to_id(E_IMG)
    self.b_ev_id, self.e_ev_id = self.token_to_id(B_EV), self.token_to_id(E_EV)
    self.b_pl_id, self.e_pl_id = self.token_to_id(B_PL), self.token_to_id(E_PL)
    self.e_in_id = self.token_to_id(E_IN)
    self.relation_ids = {r: self.token_to_id(t) for r, t in RELATION_TOKENS.items()}
    # transformers 2.4.1 splits on its added tokens *and* on <|endoftext|>.
    self._split_tokens = frozenset((EOS,) + SPECIAL_TOKENS)
    self._split_re = re.compile(
      '(' + '|'.join(re.escape(t) for t in sorted(self._split_tokens, key=len, reverse=True)) + ')'
    )
    self._added_ids = frozenset(self.token_to_id(t) for t in SPECIAL_TOKENS)

  # --------------------------------------------------------------- loading
  @classmethod
  def from_files(cls, vocab_json: str, merges_txt: str):
    """Loads GPT-2 format `vocab.json` + `merges.txt`."""
    for path in (vocab_json, merges_txt):
      if not os.path.exists(path):
        raise FileNotFoundError(f'Tokenizer file not found: {path}')
    bpe = models.BPE.from_file(vocab_json, merges_txt)
    return cls(_byte_level(bpe))

  @classmethod
  def from_tokenizer_json(cls, path: str):
    """Loads a Hugging Face `tokenizer.json` of a byte-level BPE (e.g. gpt2).

    Only its BPE model is used; pre-tokenizer/decoder are set to GPT-2's and
    its added tokens other than `<|endoftext|>` are rejected.
    """
    with open(path) as f:
      spec = json.load(f)
    extra = [t['content'] for t in spec.get('added_tokens', []) if t['content'] != EOS]
    if extra:
      raise ValueError(f'{path}: unexpected added tokens {extra[:5]}')
    model = spec['model']
    if model.get('type') != 'BPE':
      raise ValueError(f'{path}: model type {model.get("type")!r}, want BPE')
    merges = [tuple(m.split(' ', 1)) if isinstance(m, str) else tuple(m) for m in model['merges']]
    bpe = models.BPE(vocab=model['vocab'], merges=merges)
    return cls(_byte_level(bpe))

  @classmethod
  def from_dir(cls, path: str):
    """Loads `path/{vocab.json,merges.txt}`, else `path/tokenizer.json`."""
    vocab, merges = os.path.join(path, 'vocab.json'), os.path.join(path, 'merges.txt')
    if os.path.exists(vocab) and os.path.exists(merges):
      return cls.from_files(vocab, merges)
    tj = os.path.join(path, 'tokenizer.json')
    if os.path.exists(tj):
      return cls.from_tokenizer_json(tj)
    raise FileNotFoundError(f'{path}: need vocab.json + merges.txt or tokenizer.json')

  # ------------------------------------------------------------- lookups
  def token_to_id(self, token: str) -> int:
    """Id of a vocabulary or special token; KeyError if unknown."""
    i = self._tok.token_to_id(token)
    if i is None:
      raise KeyError(token)
    return i

  def id_to_token(self, i: int) -> str:
    return self._tok.id_to_token(int(i))

  def det_id(self, n: int) -> int:
    """Id of `<|detN|>`; the eos/unk id if N >= 50 (as the official code)."""
    if 0 <= n < person_tags.NUM_DET_TOKENS:
      return self.token_to_id(person_tags.det_token(n))
    return self.eos_id

  # ------------------------------------------------------------ encoding
  def split_on_special(self, text: str) -> list[str]:
    """2.4.1 split: special tokens kept, other pieces stripped, empties gone."""
    out = []
    for piece in self._split_re.split(text):
      if piece in self._split_tokens:
        out.append(piece)
      else:
        piece = piece.strip()
        if piece:
          out.append(piece)
    return out

  def tokenize(self, text: str) -> list[str]:
    """Token strings as transformers 2.4.1 `VisualCometTokenizer.tokenize`."""
    out = []
    for piece in self.split_on_special(text):
      if piece in self._split_tokens:
        out.append(piece)
      else:
        out.extend(self._tok.encode(piece, add_special_tokens=False).tokens)
    return out

  def encode(self, text: str) -> list[int]:
    """Token ids of `text` (see `tokenize`).

    Memoised (up to `_ENCODE_CACHE` strings): the expansion repeats each event
    and place string over its ~20 inferences, so the input pipeline encodes
    most segments once.
    """
    cache = self.__dict__.setdefault('_encode_cache', {})
    ids = cache.get(text)
    if ids is None:
      ids = tuple(self._encode(text))
      if len(cache) >= _ENCODE_CACHE:
        cache.clear()
      cache[text] = ids
    return list(ids)

  def _encode(self, text: str) -> list[int]:
    out = []
    for piece in self.split_on_special(text):
      if piece in self._split_tokens:
        out.append(self._tok.token_to_id(piece))
      else:
        out.extend(self._tok.encode(piece, add_special_tokens=False).ids)
    return out

  # ------------------------------------------------------------ decoding
  def _bytes_to_text(self, toks: list[str]) -> str:
    data = bytearray(_BYTE_DECODER[c] for c in ''.join(toks))
    return data.decode('utf-8', errors='replace')

  def decode(
    self,
    ids: Iterable[int],
    skip_special_tokens: bool = False,
    clean_up_tokenization_spaces: bool = True,
  ) -> str:
    """Official `VisualCometTokenizer.decode` (on top of 2.4.1's decode).

    Args:
      ids: token ids.
      skip_special_tokens: replace the structural tokens and `<|endoftext|>`
        by spaces (det tokens are kept).
      clean_up_tokenization_spaces: 2.4.1's punctuation clean-up.

    Returns:
      The text, cut at `<|e_in|>` if it is still present, stripped.
    """
    sub_texts, run = [], []
    for i in ids:
      i = int(i)
      if i in self._added_ids:
        if run:
          sub_texts.append(self._bytes_to_text(run))
          run = []
        sub_texts.append(self._tok.id_to_token(i))
      else:
        run.append(self._tok.id_to_token(i))
    if run:
      sub_texts.append(self._bytes_to_text(run))
    text = ' '.join(sub_texts)
    if clean_up_tokenization_spaces:
      text = clean_up_tokenization(text)
    if skip_special_tokens:
      for t in _TOKENS_TO_REMOVE:
        text = text.replace(t, ' ')
    idx = text.find(E_IN)
    if idx != -1:
      text = text[:idx]
    return text.strip()

  def decode_generation(
    self, new_ids: Sequence[int], name2person: Optional[dict[str, str]] = None
  ) -> str:
    """Official post-processing of one sampled continuation (run_generation.py).

    Args:
      new_ids: the generated ids after the relation token, exactly `length`
        (20 in the official setting) of them. As in the official code the
        *last* position is forced to `<|e_in|>` (so at most length - 1 content
        tokens survive) and everything after the first `<|e_in|>` is dropped.
      name2person: the record's `<|detN|>` -> digit map; tags are mapped back
        with `person_tags.replace_names` (an empty map still strips stray
        `<|det`/`|>`).

    Returns:
      The generation text as written to the official JSON.
    """
    ids = [int(i) for i in new_ids]
    if ids:
      ids[-1] = self.e_in_id
      ids = ids[: ids.index(self.e_in_id) + 1]
    text = self.decode(ids, skip_special_tokens=True)
    return person_tags.replace_names(text, name2person or {})


def _byte_level(bpe: models.BPE) -> tokenizers.Tokenizer:
  tok = tokenizers.Tokenizer(bpe)
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
  tok.decoder = decoders.ByteLevel()
  return tok


def train_bpe(
  pieces: Iterable[str], out_dir: str, vocab_size: int = 1000, min_frequency: int = 2
) -> VisualCometTokenizer:
  """Trains a byte-level BPE and writes GPT-2-format `vocab.json`/`merges.txt`.

  Args:
    pieces: training text. Pass the pieces the official tokenizer BPE-encodes
      (text between special tokens, stripped), e.g. via
      `corpus_pieces`, so word-initial pieces without "Ġ" are learnt too.
    out_dir: directory for `vocab.json` and `merges.txt` (created; files are
      written to temporary names and renamed).
    vocab_size: base vocabulary size including the 256 byte symbols and
      `<|endoftext|>` (which gets the last id, as in GPT-2).
    min_frequency: minimum pair count for a merge.

  Returns:
    The loaded tokenizer (special tokens appended after the base vocabulary).
  """
  tok = tokenizers.Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
  trainer = trainers.BpeTrainer(
    vocab_size=vocab_size - 1,
    min_frequency=min_frequency,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    special_tokens=[],
    show_progress=False,
  )
  tok.train_from_iterator(list(pieces), trainer)
  os.makedirs(out_dir, exist_ok=True)
  with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
    tok.model.save(tmp)
    with open(os.path.join(tmp, 'vocab.json')) as f:
      vocab = json.load(f)
    vocab[EOS] = len(vocab)
    with open(os.path.join(tmp, 'vocab.json'), 'w') as f:
      json.dump(vocab, f, ensure_ascii=False)
    for name in ('vocab.json', 'merges.txt'):
      os.replace(os.path.join(tmp, name), os.path.join(out_dir, name))
  return VisualCometTokenizer.from_dir(out_dir)


def corpus_pieces(texts: Iterable[str]) -> list[str]:
  """Splits texts on the special tokens as `tokenize` does (BPE input)."""
  split_re = re.compile(
    '|'.join(re.escape(t) for t in sorted((EOS,) + SPECIAL_TOKENS, key=len, reverse=True))
  )
  out = []
  for text in texts:
    out.extend(p.strip() for p in split_re.split(text) if p.strip())
  return out
