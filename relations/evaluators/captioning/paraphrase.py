"""Exact, corpus-specific filtering of METEOR's paraphrase table.

METEOR 1.5 spends most of its start-up (several CPU-seconds per process)
reading ``data/paraphrase-en.gz`` (5.3M entries) into a transducer.  Its
paraphrase stage (edu/cmu/meteor/aligner/ParaphraseMatcher.java) only ever
uses an entry whose reference phrase occurs word for word in one sentence and
whose paraphrase occurs word for word in the other; the probability line is
read and ignored (ParaphraseTransducer.java).  Keeping, in file order, every
entry whose words can all occur in the evaluated text therefore gives the
same matches in the same order, hence the same statistics.

"Can occur": METEOR's normaliser (-norm) lower-cases and only inserts spaces
next to characters outside its alphanumeric class ``ALNUM`` (Latin,
Latin-1/Extended-A, Cyrillic) and deletes the dots inside dotted words
("u.s." -> "us"), so every alphanumeric run of a normalised word is a whole
alphanumeric run of the input, lower-cased or not, with or without its dots.
An entry is kept iff every ``ALNUM`` run of each of its words is such a run
of the evaluated text; words without runs are always kept.
This is a superset of the entries METEOR can use.  tests/commonsense_metrics
checks equality with the full table.

The table is indexed once per machine (``~/.cache/relations`` or
$RELATIONS_CACHE_DIR) and then filtered in well under a second.
"""

import gzip
import os
import re
import shutil
import tempfile
from typing import Iterable

import numpy as np

from relations.evaluators.captioning import java as java_lib

# The alnum class of edu/cmu/meteor/util/Normalizer.java.
ALNUM = re.compile("[0-9A-Za-z\u0160\u017d\u0161\u017e\u0178\u00c0-\u00d6"
                   "\u00d8-\u00f6\u00f8-\u017e\u0400-\u04ff\u0500-\u0527"
                   "\ua640-\ua66e\ua67e-\ua697\u1d00-\u1d7f]+")
_VERSION = "1"
_ODD_WHITESPACE = re.compile(r"[^\S \t\n\f]|\r")


def default_table() -> str:
  return os.path.join(os.path.dirname(java_lib.meteor_jar()), "data",
                      "paraphrase-en.gz")


def cache_root() -> str:
  return os.environ.get("RELATIONS_CACHE_DIR",
                        os.path.join(os.path.expanduser("~"), ".cache",
                                     "relations"))


class ParaphraseIndex:
  """Word-id index of a METEOR paraphrase table (see module docstring)."""

  def __init__(self, directory: str):
    data = np.load(os.path.join(directory, "index.npz"))
    self.tokens = data["tokens"]  # [T] word ids, entries back to back.
    self.offsets = data["offsets"]  # [2E+1]: ref = [o[2e], o[2e+1]), para..
    self.run_ids = data["run_ids"]  # [R'] run ids of all words.
    self.run_offsets = data["run_offsets"]  # [V+1]
    with open(os.path.join(directory, "vocab.txt"), encoding="utf-8") as f:
      self.vocab = f.read().split("\n")
    with open(os.path.join(directory, "runs.txt"), encoding="utf-8") as f:
      self.runs = {r: i for i, r in enumerate(f.read().split("\n"))}

  @classmethod
  def build(cls, table: str, directory: str) -> None:
    """Indexes `table` into `directory` (written atomically)."""
    vocab, runs = {}, {}
    tokens, offsets = [], [0]
    with gzip.open(table, "rt", encoding="utf-8", newline="\n") as f:
      text = f.read()
    # Java's readLine/StringTokenizer split on \n, \r and " \t\n\r\f";
    # Python's str.split() on more characters.  They agree when the table
    # holds no '\r' and no other whitespace.
    odd = _ODD_WHITESPACE.search(text)
    if odd:
      raise ValueError(f"{table}: unsupported whitespace {odd.group()!r} at "
                       f"offset {odd.start()}")
    lines = text.split("\n")
    del text
    if lines and lines[-1] == "":
      lines.pop()
    get = vocab.setdefault
    for e in range(0, len(lines) - 2, 3):
      for phrase in (lines[e + 1], lines[e + 2]):
        tokens.extend(get(w, len(vocab)) for w in phrase.split())
        offsets.append(len(tokens))
    words = list(vocab)
    run_ids, run_offsets = [], [0]
    rget = runs.setdefault
    for w in words:
      run_ids.extend(rget(r, len(runs)) for r in ALNUM.findall(w))
      run_offsets.append(len(run_ids))
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp_", dir=parent)
    try:
      np.savez(os.path.join(tmp, "index.npz"),
               tokens=np.array(tokens, np.int32),
               offsets=np.array(offsets, np.int64),
               run_ids=np.array(run_ids, np.int32),
               run_offsets=np.array(run_offsets, np.int64))
      for name, items in (("vocab.txt", words), ("runs.txt", list(runs))):
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
          f.write("\n".join(items))
      os.replace(tmp, directory)
    except BaseException:
      shutil.rmtree(tmp, ignore_errors=True)
      raise

  def filter(self, texts: Iterable[str], out_path: str) -> int:
    """Writes the entries usable for `texts` as a gzipped table.

    Returns:
      The number of entries kept.
    """
    run_ok = np.zeros(len(self.runs), bool)
    for text in texts:
      lower = text.lower()
      # The normaliser deletes the dots of dotted words ("u.s." -> "us"),
      # joining runs; the dot-free forms cover those joins.
      for form in (text, lower, text.replace(".", ""),
                   lower.replace(".", "")):
        for r in ALNUM.findall(form):
          i = self.runs.get(r)
          if i is not None:
            run_ok[i] = True
    # A word is bad if any of its runs is absent from the text.
    bad_runs = np.concatenate([[0], np.cumsum(~run_ok[self.run_ids])])
    word_bad = (bad_runs[self.run_offsets[1:]] -
                bad_runs[self.run_offsets[:-1]]) > 0
    bad_tok = np.concatenate([[0], np.cumsum(word_bad[self.tokens])])
    starts, ends = self.offsets[0:-1:2], self.offsets[2::2]
    keep = np.nonzero(bad_tok[ends] - bad_tok[starts] == 0)[0]
    vocab, tokens, offsets = self.vocab, self.tokens, self.offsets
    parts = []
    for e in keep.tolist():
      a, b, c = offsets[2 * e], offsets[2 * e + 1], offsets[2 * e + 2]
      parts.append("0\n" + " ".join(vocab[t] for t in tokens[a:b].tolist())
                   + "\n" + " ".join(vocab[t] for t in tokens[b:c].tolist())
                   + "\n")
    with gzip.open(out_path, "wt", encoding="utf-8", compresslevel=1) as f:
      f.write("".join(parts))
    return len(keep)


_INDEX = {}


def load_index(table: str | None = None) -> ParaphraseIndex:
  """The (cached) index of `table`, building it on first use."""
  table = table or default_table()
  st = os.stat(table)
  directory = os.path.join(
      cache_root(), f"meteor_paraphrase_v{_VERSION}_{st.st_size}_"
      f"{st.st_mtime_ns}")
  if directory not in _INDEX:
    if not os.path.isfile(os.path.join(directory, "index.npz")):
      ParaphraseIndex.build(table, directory)
    _INDEX[directory] = ParaphraseIndex(directory)
  return _INDEX[directory]
