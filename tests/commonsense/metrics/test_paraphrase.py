"""The witness-indexed paraphrase filter keeps exactly the right entries.

"Right" = every word's ALNUM runs occur in the text (paraphrase.py); the
full-table equality of METEOR itself is checked in test_meteor/test_protocol.
"""

import gzip
import os
import random
import zipfile

import numpy as np
import pytest

from relations.commonsense.metrics import java
from relations.commonsense.metrics import paraphrase
from tests.commonsense.metrics import fixtures


def _brute_force_keep(index, texts):
  """All entries whose tokens are all good words, by scanning every token."""
  good = index.good_words(texts)
  bad = np.concatenate([[0], np.cumsum(~good[index.tokens])])
  starts, ends = index.offsets[0:-1:2], index.offsets[2::2]
  return np.nonzero(bad[ends] == bad[starts])[0]


def _texts(seed):
  rng = random.Random(seed)
  index = paraphrase.load_index()
  words = [index.vocab[rng.randrange(len(index.vocab))] for _ in range(3000)]
  odd = fixtures.ODD + ["SCORE ||| U.S.-based ||| the u.s. ||| N.Y.C. cab"]
  return [" ".join(rng.sample(words, 8)) + " " + rng.choice(odd) for _ in range(400)]


@pytest.mark.parametrize(
  "texts",
  [[], [""], ["the man walks into the room"], ["U.S. Ph.D. café naïve Ω"], _texts(0), _texts(1)],
)
def test_keep_equals_brute_force(texts):
  index = paraphrase.load_index()
  expected = _brute_force_keep(index, texts)
  got = index.keep(texts)
  np.testing.assert_array_equal(got, expected)
  assert len(texts) < 400 or len(got) > 1000  # Big corpora keep many.


def test_filter_writes_entries_in_table_order(tmp_path):
  index = paraphrase.load_index()
  texts = ["he walked into the room and sat down quickly"]
  out = tmp_path / "p.gz"
  kept = index.filter(texts, str(out))
  with gzip.open(out, "rt", encoding="utf-8") as f:
    lines = f.read().split("\n")
  assert lines[-1] == "" and len(lines) == 3 * kept + 1
  ids = index.keep(texts)
  for k, e in enumerate(ids.tolist()):
    a, b, c = (index.offsets[2 * e], index.offsets[2 * e + 1], index.offsets[2 * e + 2])
    assert lines[3 * k] == "0"
    assert lines[3 * k + 1].split() == [index.vocab[t] for t in index.tokens[a:b]]
    assert lines[3 * k + 2].split() == [index.vocab[t] for t in index.tokens[b:c]]
  # E.g. "walked into" <-> "entered" needs "entered", absent here.
  words = set(texts[0].split())
  for k in range(kept):
    for w in lines[3 * k + 1].split() + lines[3 * k + 2].split():
      assert all(r in words for r in paraphrase.ALNUM.findall(w)), w


# Synonyms: METEOR's SynonymDictionary re-stated (meteor-1.5.jar semantics).


def _read_synonyms(synsets: str, exceptions: str):
  lines = synsets.split("\n")
  word_to_synsets = {}
  for k in range(0, len(lines) - 1, 2):
    word_to_synsets[lines[k]] = set(map(int, lines[k + 1].split()))
  lines = exceptions.split("\n")
  word_to_bases = {}
  for k in range(0, len(lines) - 1, 2):
    for form in lines[k + 1].split():
      word_to_bases.setdefault(form, []).append(lines[k])
  return word_to_synsets, word_to_bases


def _synonym_sets(word, word_to_synsets, word_to_bases):
  """getSynSets(word) | getStemSynSets(word), as SynonymMatcher uses them."""
  out = set(word_to_synsets.get(word, ()))
  if word in word_to_bases:
    for base in word_to_bases[word]:
      out |= word_to_synsets.get(base, set())
    return out
  end = "ful" if word.endswith("ful") else ""
  if word.endswith("ss") or len(word.encode("utf-16-le")) // 2 <= 2:
    morphed = word
  else:
    morphed = ""
    for suffix, replacement in paraphrase._MORPH:
      if word.endswith(suffix):
        candidate = word[: len(word) - len(suffix)] + replacement
        if candidate in word_to_synsets:
          morphed = candidate + end
          break
  return out | word_to_synsets.get(morphed, set())


_MORPH_WORDS = (
  "women children geese went ran parties boxes churches "
  "walked running happiest bigger spoonful cupfuls glasses "
  "u.s. o'clock rock'n'roll Café naïve mice teeth feet oxen "
  "bosses buses dishes men's 'hood wives knives leaves"
).split()


def _synonym_texts(seed):
  rng = random.Random(seed)
  index = paraphrase.load_synonyms()
  keys = index.synsets.decode().split("\n")[0:-1:2]
  forms = [f for _, fs, _, _ in index.exceptions for f in fs.split()]
  words = []
  for _ in range(400):
    w = rng.choice([rng.choice(keys), rng.choice(forms), rng.choice(_MORPH_WORDS)])
    w += rng.choice(["", "", "s", "es", "ed", "ing", "er", "est", "ful", "ies"])
    words.append(w.upper() if rng.random() < 0.1 else w)
  return [" ".join(words[i : i + 8]) for i in range(0, len(words), 8)]


@pytest.mark.parametrize(
  "texts",
  [
    [],
    ["the man walks into the room"],
    [" ".join(_MORPH_WORDS)],
    _synonym_texts(0),
    _synonym_texts(1),
  ],
)
def test_filtered_synonyms_answer_like_the_full_files(texts, tmp_path):
  index = paraphrase.load_synonyms()
  with zipfile.ZipFile(java.meteor_jar()) as z:
    full = _read_synonyms(
      z.read("synonym/english.synsets").decode(), z.read("synonym/english.exceptions").decode()
    )
  kept = index.filter(texts, str(tmp_path))
  with open(tmp_path / "english.synsets", encoding="ascii") as f:
    synsets = f.read()
  with open(tmp_path / "english.exceptions", encoding="utf-8") as f:
    exceptions = f.read()
  filtered = _read_synonyms(synsets, exceptions)
  assert kept == (len(exceptions.split("\n")) // 2, len(synsets.split("\n")) // 2)
  assert (tmp_path / "english.relations").read_bytes() == b""
  # Candidate normalised words: the tokens, their runs, lower-cased and
  # without dots, and runs glued with the punctuation WordNet keys contain.
  runs = sorted(paraphrase.text_runs(texts))
  rng = random.Random(0)
  words = set(runs)
  for t in " ".join(texts).split():
    words.update([t, t.lower(), t.replace(".", ""), t.lower().strip(".")])
  for _ in range(2000 if runs else 0):
    words.add(rng.choice(runs) + rng.choice("'-._") + rng.choice(runs))
  differing = [w for w in words if _synonym_sets(w, *full) != _synonym_sets(w, *filtered)]
  assert not differing
  # The filter is selective: a plain sentence keeps a few hundred entries.
  assert len(texts) > 1 or kept[1] < 2000


def test_cache_key_follows_content_not_mtime(tmp_path):
  a, b, c = tmp_path / "a.gz", tmp_path / "b.gz", tmp_path / "c.gz"
  a.write_bytes(b"0\nx y\nz\n" * 1000)
  b.write_bytes(b"0\nx y\nz\n" * 1000)
  c.write_bytes(b"0\nx y\nw\n" * 1000)
  os.utime(b, ns=(1, 1))
  # A reinstall (same bytes, new mtime) reuses the index; other bytes don't.
  assert paraphrase.content_key(str(a)) == paraphrase.content_key(str(b))
  assert paraphrase.content_key(str(a)) != paraphrase.content_key(str(c))
  assert paraphrase.content_key(str(a)).startswith(f"{8 * 1000}_")
