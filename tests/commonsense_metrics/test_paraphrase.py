"""The witness-indexed paraphrase filter keeps exactly the right entries.

"Right" = every word's ALNUM runs occur in the text (paraphrase.py); the
full-table equality of METEOR itself is checked in test_meteor/test_protocol.
"""

import gzip
import random

import numpy as np
import pytest

from relations.evaluators.captioning import paraphrase
from tests.commonsense_metrics import fixtures


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
  return [" ".join(rng.sample(words, 8)) + " " + rng.choice(odd)
          for _ in range(400)]


@pytest.mark.parametrize("texts", [
    [], [""], ["the man walks into the room"], ["U.S. Ph.D. café naïve Ω"],
    _texts(0), _texts(1)])
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
    a, b, c = (index.offsets[2 * e], index.offsets[2 * e + 1],
               index.offsets[2 * e + 2])
    assert lines[3 * k] == "0"
    assert lines[3 * k + 1].split() == [index.vocab[t] for t in
                                         index.tokens[a:b]]
    assert lines[3 * k + 2].split() == [index.vocab[t] for t in
                                        index.tokens[b:c]]
  # E.g. "walked into" <-> "entered" needs "entered", absent here.
  words = set(texts[0].split())
  for k in range(kept):
    for w in lines[3 * k + 1].split() + lines[3 * k + 2].split():
      assert all(r in words for r in paraphrase.ALNUM.findall(w)), w
