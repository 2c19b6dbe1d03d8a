"""METEOR: the aggregated-statistics shortcut equals the jar's own EVAL.

The corpus also exercises the filtered paraphrase table and synonym files
(irregular forms, suffixes, synonyms) against pycocoevalcap's full ones.
"""

import random
import subprocess

import pytest
from pycocoevalcap.meteor.meteor import Meteor

from relations.commonsense.metrics import java
from relations.commonsense.metrics import meteor


def _nasty_corpus(seed=0, n=300):
  rng = random.Random(seed)
  words = (
    "the a man woman 1 2 's walk walked walking into room rooms "
    "party ask asks to dance drink order greet her his hand talk go "
    "home sit down chair café naïve Ω 漢字 🙂 ||| | -- . , u.s. "
    "rock'n'roll don't women children geese went ran parties boxes "
    "churches walked running happiest bigger spoonful glasses "
    "o'clock mice teeth wives knives leaves buses dishes men's "
    "female adult kid kids child youngster auto car automobile "
    "begin start commence quick fast rapid"
  ).split()
  sent = lambda k: " ".join(rng.choice(words) for _ in range(k))
  hyps, refs = [], []
  for i in range(n):
    r = [sent(rng.randint(0, 9)) for _ in range(rng.randint(1, 5))]
    kind = i % 6
    if kind == 0:
      h = r[0]  # Perfect match (the chunk rule of addStats).
    elif kind == 1:
      h = ""  # Empty hypothesis.
    elif kind == 2:
      h = sent(rng.randint(150, 300))  # Very long line.
    elif kind == 3:
      h = "||| " + sent(3) + " |||"  # Removed by score_line.
    else:
      h = sent(rng.randint(1, 12))
    hyps.append(h)
    refs.append(r)
  hyps += ["a", "a b c", "", "x y"]
  refs += [["a"], ["a b c"], [""], ["y x"]]
  return hyps, refs


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_aggregate_equals_full_eval_and_pycocoevalcap():
  hyps, refs = _nasty_corpus()
  gts = {i: list(r) for i, r in enumerate(refs)}
  res = {i: [h] for i, h in enumerate(hyps)}
  expected, _ = Meteor().compute_score(gts, res)
  assert meteor.corpus_meteor(hyps, refs, workers=2) == expected
  assert meteor.corpus_meteor(hyps, refs, workers=1, full_eval=True) == expected


def _random_stats(rng):
  """A statistics line of random integer counts (not necessarily valid)."""
  v = [rng.randint(0, 30) for _ in range(meteor._NUM_STATS)]
  if rng.random() < 0.4:  # A perfect match in one chunk.
    v[4:20] = [0] * 16
    v[4], v[5], v[6], v[7] = (
      rng.randint(0, 9),
      rng.randint(0, 9),
      rng.randint(0, 9),
      rng.randint(0, 9),
    )
    v[0], v[1] = v[4] + v[6], v[5] + v[7]
    v[20] = 1
  return " ".join(f"{x}.0" for x in v)


@pytest.mark.slow  # 10-40 s on 2 cores (#38 timings)
def test_sing_of_aggregate_equals_eval_on_random_statistics():
  rng = random.Random(0)
  worker = meteor._Worker(java.java_executable("test"), java.meteor_jar(), None)
  try:
    for trial in range(30):
      n = rng.choice([1, 2, 3, 50, 400])
      stats = [_random_stats(rng) for _ in range(n)]
      if trial % 5 == 0:
        stats = [stats[0]] * n  # Duplicates (counted with multiplicity).
      full = worker.query(["EVAL ||| " + " ||| ".join(stats)], n + 1)
      aggregate = meteor.aggregate_stats(stats)
      assert worker.query(["SING ||| " + aggregate], 1) == full[-1:], stats
  finally:
    worker.close()


def test_aggregate_known_values_and_fallback():
  perfect = "2.0 2.0 0.0 0.0 2.0 2.0 0.0 0.0" + " 0.0" * 12 + " 1.0 2.0 2.0"
  partial = "3.0 4.0 1.0 1.0 1.0 1.0 1.0 1.0" + " 0.0" * 12 + " 2.0 2.0 2.0"
  # The perfect match's single chunk is not added (MeteorStats.addStats).
  assert meteor.aggregate_stats([perfect, partial, partial]) == (
    "8.0 10.0 2.0 2.0 4.0 4.0 2.0 2.0" + " 0.0" * 12 + " 4.0 6.0 6.0"
  )
  assert meteor.aggregate_stats([perfect]) == (
    "2.0 2.0 0.0 0.0 2.0 2.0 0.0 0.0" + " 0.0" * 12 + " 0.0 2.0 2.0"
  )
  # Anything but 23 integer counts: no shortcut.
  assert meteor.aggregate_stats([partial.replace("3.0", "2.5", 1)]) is None
  assert meteor.aggregate_stats([partial + " 1.0"]) is None
  assert meteor.aggregate_stats(["Error: specify SCORE or EVAL"]) is None
  assert meteor.aggregate_stats([partial.replace("3.0", "NaN", 1)]) is None


def test_filtered_resources_give_identical_statistics(tmp_path):
  lines = [
    meteor.score_line(h, r)
    for h, r in [
      ("the car", ["the automobile"]),
      ("women went home", ["woman goes home"]),
      ("he commenced quickly", ["he started fast"]),
      ("the kids ran", ["the children running"]),
      ("u.s. cars", ["the us automobiles"]),
    ]
  ]
  jar = java.meteor_jar()
  meteor.paraphrase.load_index().filter(lines, str(tmp_path / "p.gz"))
  meteor.paraphrase.load_synonyms(jar).filter(lines, str(tmp_path / "syn"))
  filtered = meteor._Worker(
    java.java_executable("test"), jar, str(tmp_path / "p.gz"), str(tmp_path / "syn")
  )
  full = meteor._Worker(java.java_executable("test"), jar, None)
  try:
    got = filtered.query(lines, len(lines))
    expected = full.query(lines, len(lines))
  finally:
    filtered.close()
    full.close()
  assert got == expected
  # Stage 3 (synonyms) and 4 (paraphrases) really matched something.
  stats = [list(map(float, s.split())) for s in got]
  assert sum(s[12] + s[13] for s in stats) > 0
  assert sum(s[16] + s[17] for s in stats) > 0


def test_prenormalise_known_values():
  assert meteor.prenormalise(" grab 2 's hand ") == "grab 2 ' s hand"
  assert meteor.prenormalise("do n't  go") == "do n 't go"
  assert meteor.prenormalise("they 're 'll x1 42") == "they ' re ' ll x1 42"
  assert meteor.prenormalise("") == "" and meteor.prenormalise("  ") == ""
  for outside in [
    "Grab",
    "u.s.",
    "o'clock",
    "'90s",
    "'",
    "''",
    "a-b",
    "x,y",
    "café",
    "rock'n'roll",
    "a\tb",
    "it's",
    "-lrb-",
    "&",
  ]:
    assert meteor.prenormalise(outside) is None, outside
  assert meteor.prenormalised_line("a 's", ["b", "c n't"]) == ("SCORE ||| b ||| c n 't ||| a ' s")
  assert meteor.prenormalised_line("a", ["b|c"]) is None


def _plain_corpus(seed, n=1500):
  rng = random.Random(seed)
  words = (
    "a the man woman 1 2 12 walk walked into room rooms go went women "
    "do does ca wo is are he she they car automobile start begin "
    "x y z"
  ).split()
  clitics = ["'s", "'re", "'ll", "'ve", "'m", "'d", "n't", "'em", "'t"]

  def seg():
    toks = [
      rng.choice(clitics) if rng.random() < 0.2 else rng.choice(words)
      for _ in range(rng.randint(0, 10))
    ]
    return (" " * rng.randint(0, 2)) + (" " * rng.randint(1, 2)).join(toks)

  return [(seg(), [seg() for _ in range(rng.randint(1, 4))]) for _ in range(n)]


def test_prenormalised_lower_equals_norm_statistics(tmp_path):
  pairs = _plain_corpus(0)
  raw = [meteor.score_line(h, r) for h, r in pairs]
  pre = [meteor.prenormalised_line(h, r) for h, r in pairs]
  assert None not in pre
  jar = java.meteor_jar()
  meteor.paraphrase.load_index().filter(raw, str(tmp_path / "p.gz"))
  meteor.paraphrase.load_synonyms(jar).filter(raw, str(tmp_path / "syn"))
  workers = [
    meteor._Worker(
      java.java_executable("test"), jar, str(tmp_path / "p.gz"), str(tmp_path / "syn"), mode
    )
    for mode in (meteor._NORM, meteor._LOWER)
  ]
  try:
    expected = workers[0].query(raw, len(raw))
    got = workers[1].query(pre, len(pre))
  finally:
    for w in workers:
      w.close()
  assert got == expected
  # The clitics were really split ("'s" -> "' s" gives 2 test words).
  assert len({s.split()[0] for s in got}) > 5


def test_worker_counts():
  assert meteor._worker_counts(2, 0, 100) == {meteor._LOWER: 2}
  assert meteor._worker_counts(2, 100, 0) == {meteor._NORM: 2}
  assert meteor._worker_counts(2, 5, 1000) == {meteor._LOWER: 2, meteor._NORM: 1}
  assert meteor._worker_counts(2, 500, 500) == {meteor._LOWER: 1, meteor._NORM: 1}
  assert meteor._worker_counts(1, 500, 500) == {meteor._LOWER: 1, meteor._NORM: 1}


def test_prenormalise_equals_the_jar_normaliser():
  # The jar's own Normalizer main (normalizeLine(line, en, keepPunctuation
  # = true), as -norm runs it) on random segments over the class's
  # alphabet, in and out of the class.
  rng = random.Random(1)
  pieces = [
    "a",
    "b",
    "s",
    "t",
    "n",
    "x",
    "0",
    "7",
    "'",
    " ",
    "  ",
    "n't",
    "'s",
    "'re",
    "walk",
    "2",
    "''",
  ]
  segments = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
  segments += [s for s, _ in _plain_corpus(2, 2000)]
  proc = subprocess.run(
    [
      java.java_executable("test"),
      "-cp",
      java.meteor_jar(),
      "edu.cmu.meteor.util.Normalizer",
      "en",
      "true",
    ],
    input="\n".join(s.strip(" ") for s in segments) + "\n",
    capture_output=True,
    text=True,
    check=True,
  )
  expected = proc.stdout.split("\n")[:-1]
  assert len(expected) == len(segments)
  inside = 0
  for seg, exp in zip(segments, expected):
    got = meteor.prenormalise(seg)
    if got is not None:
      inside += 1
      assert got == exp, seg
  assert inside > 5000
