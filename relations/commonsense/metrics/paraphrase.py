"""Exact, corpus-specific filtering of METEOR's paraphrase table and synonyms.

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
This is a superset of the entries METEOR can use.  tests/commonsense/metrics
checks equality with the full table.

The table is indexed once per machine (``~/.cache/relations`` or
$RELATIONS_CACHE_DIR, ~15 CPU-seconds); filtering then takes milliseconds
(see ParaphraseIndex).  The WordNet synonym files are filtered the same way
(SynonymIndex).
"""

import gzip
import hashlib
import json
import os
import re
import shutil
import tempfile
import zipfile
from typing import Iterable

import numpy as np

from relations.commonsense.metrics import java as java_lib

# The alnum class of edu/cmu/meteor/util/Normalizer.java.
ALNUM = re.compile(
  "[0-9A-Za-z\u0160\u017d\u0161\u017e\u0178\u00c0-\u00d6"
  "\u00d8-\u00f6\u00f8-\u017e\u0400-\u04ff\u0500-\u0527"
  "\ua640-\ua66e\ua67e-\ua697\u1d00-\u1d7f]+"
)
_VERSION = "2"
_ODD_WHITESPACE = re.compile(r"[^\S \t\n\f]|\r")


def default_table() -> str:
  return os.path.join(os.path.dirname(java_lib.meteor_jar()), "data", "paraphrase-en.gz")


def cache_root() -> str:
  return os.environ.get(
    "RELATIONS_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "relations")
  )


_ARRAYS = (
  "tokens",
  "offsets",
  "run_ids",
  "run_offsets",
  "witness_offsets",
  "witness_entries",
  "runless_entries",
)


class ParaphraseIndex:
  """Word-id index of a METEOR paraphrase table (see module docstring).

  Filtering must find the entries whose words are all "good" (their runs
  occur in the text) without scanning all 5.3M entries: every entry is filed
  under its witness, the word with runs that occurs in the fewest entries.
  An entry can only be kept if its witness is good, so the candidates are
  the entries filed under good words (few, since common words are rarely
  any entry's rarest word); each candidate is then checked word by word.
  Entries made only of words without runs are always kept.  The arrays are
  memory-mapped, so loading costs next to nothing.
  """

  def __init__(self, directory: str):
    for name in _ARRAYS:
      setattr(self, name, np.load(os.path.join(directory, name + ".npy"), mmap_mode="r"))
    # tokens [T] word ids, entries back to back; offsets [2E+1]: entry e's
    # reference phrase is tokens[o[2e]:o[2e+1]], its paraphrase
    # tokens[o[2e+1]:o[2e+2]]; run_ids/run_offsets: the ALNUM runs of each
    # word (CSR); witness_entries/witness_offsets: entry ids filed under
    # each word (CSR, ascending); runless_entries: always-kept entry ids.
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
      raise ValueError(f"{table}: unsupported whitespace {odd.group()!r} at offset {odd.start()}")
    lines = text.split("\n")
    del text
    if lines and lines[-1] == "":
      lines.pop()
    get = vocab.setdefault
    for e in range(0, len(lines) - 2, 3):
      for phrase in (lines[e + 1], lines[e + 2]):
        tokens.extend(get(w, len(vocab)) for w in phrase.split())
        offsets.append(len(tokens))
    del lines
    words = list(vocab)
    run_ids, run_offsets = [], [0]
    rget = runs.setdefault
    for w in words:
      run_ids.extend(rget(r, len(runs)) for r in ALNUM.findall(w))
      run_offsets.append(len(run_ids))
    arrays = {
      "tokens": np.array(tokens, np.int32),
      "offsets": np.array(offsets, np.int64),
      "run_ids": np.array(run_ids, np.int32),
      "run_offsets": np.array(run_offsets, np.int64),
    }
    del tokens, offsets
    arrays.update(
      _witnesses(arrays["tokens"], arrays["offsets"], np.diff(arrays["run_offsets"]) > 0)
    )
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp_", dir=parent)
    try:
      for name in _ARRAYS:
        np.save(os.path.join(tmp, name + ".npy"), arrays[name])
      for name, items in (("vocab.txt", words), ("runs.txt", list(runs))):
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
          f.write("\n".join(items))
      _publish(tmp, directory)
    except BaseException:
      shutil.rmtree(tmp, ignore_errors=True)
      raise

  def good_words(self, texts: Iterable[str]) -> np.ndarray:
    """[V] bool: every ALNUM run of the word occurs in `texts`."""
    run_ok = np.zeros(len(self.runs), bool)
    runs = self.runs
    for r in text_runs(texts):
      i = runs.get(r)
      if i is not None:
        run_ok[i] = True
    return _all_ok(run_ok, self.run_ids, self.run_offsets)

  def keep(self, texts: Iterable[str]) -> np.ndarray:
    """Ascending ids of the entries whose words are all good for `texts`."""
    good = self.good_words(texts)
    wo = self.witness_offsets
    words = np.nonzero(good & (wo[1:] > wo[:-1]))[0]
    cand = np.concatenate(
      [self.witness_entries[wo[w] : wo[w + 1]] for w in words.tolist()] + [np.zeros(0, np.int64)]
    ).astype(np.int64)
    if len(cand):
      starts = self.offsets[2 * cand]
      lengths = self.offsets[2 * cand + 2] - starts
      # Token positions of all candidates, back to back.
      first = np.repeat(np.cumsum(lengths) - lengths, lengths)
      pos = np.repeat(starts, lengths) + np.arange(len(first)) - first
      tok_good = good[self.tokens[pos]]
      seg_starts = np.cumsum(lengths) - lengths
      cand = cand[np.logical_and.reduceat(tok_good, seg_starts)]
    return np.union1d(cand, self.runless_entries)

  def filter(self, texts: Iterable[str], out_path: str) -> int:
    """Writes the entries usable for `texts` as a gzipped table.

    Returns:
      The number of entries kept.
    """
    keep = self.keep(texts)
    vocab, tokens, offsets = self.vocab, self.tokens, self.offsets
    parts = []
    for e in keep.tolist():
      a, b, c = offsets[2 * e], offsets[2 * e + 1], offsets[2 * e + 2]
      parts.append(
        "0\n"
        + " ".join(vocab[t] for t in tokens[a:b].tolist())
        + "\n"
        + " ".join(vocab[t] for t in tokens[b:c].tolist())
        + "\n"
      )
    with gzip.open(out_path, "wt", encoding="utf-8", compresslevel=1) as f:
      f.write("".join(parts))
    return len(keep)


def _publish(tmp: str, directory: str) -> None:
  """Renames the finished `tmp` to `directory` (a concurrent build may win)."""
  try:
    os.replace(tmp, directory)
  except OSError:
    if not os.path.isdir(directory):
      raise
    shutil.rmtree(tmp, ignore_errors=True)  # Another process was first.


def text_runs(texts: Iterable[str]) -> set[str]:
  """The ALNUM runs METEOR's normalised words can be made of (docstring)."""
  # Runs never contain whitespace, so the runs of the distinct
  # whitespace-separated tokens are the runs of the texts.
  words = set()
  for text in texts:
    words.update(text.split())
  out = set()
  for word in words:
    lower = word.lower()
    # The normaliser deletes the dots of dotted words ("u.s." -> "us"),
    # joining runs; the dot-free forms cover those joins.
    for form in (word, lower, word.replace(".", ""), lower.replace(".", "")):
      out.update(ALNUM.findall(form))
  return out


def _all_ok(run_ok: np.ndarray, run_ids: np.ndarray, run_offsets: np.ndarray) -> np.ndarray:
  """[V] bool: all runs run_ids[run_offsets[v]:run_offsets[v+1]] are ok."""
  bad_runs = np.concatenate([[0], np.cumsum(~run_ok[run_ids])])
  return bad_runs[run_offsets[1:]] == bad_runs[run_offsets[:-1]]


def _witnesses(
  tokens: np.ndarray, offsets: np.ndarray, has_runs: np.ndarray
) -> dict[str, np.ndarray]:
  """Files every entry under its witness word (see ParaphraseIndex)."""
  num_words = len(has_runs)
  num_entries = (len(offsets) - 1) // 2
  entry_freq = np.bincount(tokens, minlength=num_words).astype(np.int64)
  # Key = (frequency, word id); words without runs never witness.
  key = np.where(has_runs, entry_freq, np.int64(2**40)) * num_words
  key += np.arange(num_words)
  starts = offsets[0:-1:2]
  lengths = offsets[2::2] - starts
  nonempty = lengths > 0
  best = np.full(num_entries, np.int64(2**62))
  best[nonempty] = np.minimum.reduceat(key[tokens], starts[nonempty])
  witness = best % num_words
  runless = ~nonempty | ~has_runs[witness]
  entries = np.nonzero(~runless)[0]
  order = np.argsort(witness[entries], kind="stable")
  counts = np.bincount(witness[entries], minlength=num_words)
  return {
    "witness_entries": entries[order].astype(np.int64),
    "witness_offsets": np.concatenate([[0], np.cumsum(counts)]),
    "runless_entries": np.nonzero(runless)[0].astype(np.int64),
  }


# Synonyms ---------------------------------------------------------------

# SynonymDictionary.morph's (suffix, replacement) rules (meteor-1.5.jar).
_MORPH = (
  ("s", ""),
  ("ses", "s"),
  ("xes", "x"),
  ("zes", "z"),
  ("ches", "ch"),
  ("shes", "sh"),
  ("men", "man"),
  ("ies", "y"),
  ("s", ""),
  ("ies", "y"),
  ("es", "e"),
  ("es", ""),
  ("ed", "e"),
  ("ed", ""),
  ("ing", "e"),
  ("ing", ""),
  ("er", ""),
  ("est", ""),
  ("er", "e"),
  ("est", "e"),
)
_SYN_LANG = "english"


class SynonymIndex:
  """METEOR's WordNet synonym files, indexed for exact filtering.

  Besides the paraphrase table, METEOR's start-up reads the synonym files
  (``synonym/english.{exceptions,synsets}`` in the jar; 0.2 CPU-s of its
  0.3 s).  edu/cmu/meteor/aligner/SynonymMatcher only asks the
  SynonymDictionary two things about a normalised word w (the relations
  file is never read):
  * getSynSets(w): the synsets of key w (the last line wins for repeated
    keys), and
  * getStemSynSets(w): the synsets of the bases that the exceptions file
    lists for form w, or else of morph(w): the first of w's suffix
    replacements (_MORPH, plus "ful" re-appended when w ends with "ful")
    that is a synsets key, w itself for short words and words ending in
    "ss", or "".
  So keeping (in file order) every exceptions entry with a form that can be
  a word of the text, every synsets key that can be such a word or a
  replacement of one, and the synsets keys of the kept entries' bases gives
  the same answers for every word of the text.  "Can be": as for the
  paraphrase table, each ALNUM run of a normalised word is one of
  text_runs(); a suffix replacement changes only the word's last run (the
  suffixes are letters), into one of _tail_runs().
  """

  def __init__(self, directory: str):
    self.directory = directory
    self.key_run_ids = np.load(os.path.join(directory, "key_run_ids.npy"))
    self.key_run_offsets = np.load(os.path.join(directory, "key_run_offsets.npy"))
    self.pair_offsets = np.load(os.path.join(directory, "pair_offsets.npy"))
    with open(os.path.join(directory, "synsets"), "rb") as f:
      self.synsets = f.read()
    with open(os.path.join(directory, "runs.txt"), encoding="utf-8") as f:
      self.runs = {r: i for i, r in enumerate(f.read().split("\n"))}
    with open(os.path.join(directory, "exceptions.json"), encoding="utf-8") as f:
      self.exceptions = json.load(f)

  @classmethod
  def build(cls, jar: str, directory: str) -> None:
    """Indexes the synonym files inside `jar` into `directory` (atomic)."""
    with zipfile.ZipFile(jar) as z:
      synsets = z.read(f"synonym/{_SYN_LANG}.synsets")
      exceptions = z.read(f"synonym/{_SYN_LANG}.exceptions").decode("utf-8")
    # Java's readLine also ends lines at '\r'; and the synsets file is read
    # in the platform charset: both are only safe without '\r' and in ASCII.
    if b"\r" in synsets or not synsets.isascii() or "\r" in exceptions:
      raise ValueError(f"{jar}: unexpected bytes in the synonym files")
    lines = synsets.decode("ascii").split("\n")
    if lines[-1] == "":
      lines.pop()
    keys = lines[0::2]
    pair_offsets = [0]
    for k in range(0, len(lines) - 1, 2):
      pair_offsets.append(pair_offsets[-1] + len(lines[k]) + len(lines[k + 1]) + 2)
    runs, run_ids, run_offsets = {}, [], [0]
    for key in keys:
      run_ids.extend(runs.setdefault(r, len(runs)) for r in ALNUM.findall(key))
      run_offsets.append(len(run_ids))
    pairs_of = {}
    for i, key in enumerate(keys):
      pairs_of.setdefault(key, []).append(i)
    exc_lines = exceptions.split("\n")
    entries = []
    for k in range(0, len(exc_lines) - 1, 2):
      base, forms = exc_lines[k], exc_lines[k + 1]
      entries.append(
        [base, forms, [ALNUM.findall(f) for f in forms.split()], pairs_of.get(base, [])]
      )
    parent = os.path.dirname(directory)
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp_", dir=parent)
    try:
      np.save(os.path.join(tmp, "key_run_ids.npy"), np.array(run_ids, np.int32))
      np.save(os.path.join(tmp, "key_run_offsets.npy"), np.array(run_offsets, np.int64))
      np.save(os.path.join(tmp, "pair_offsets.npy"), np.array(pair_offsets, np.int64))
      with open(os.path.join(tmp, "synsets"), "wb") as f:
        f.write(synsets)
      with open(os.path.join(tmp, "runs.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(runs))
      with open(os.path.join(tmp, "exceptions.json"), "w", encoding="utf-8") as f:
        json.dump(entries, f)
      _publish(tmp, directory)
    except BaseException:
      shutil.rmtree(tmp, ignore_errors=True)
      raise

  def filter(self, texts: Iterable[str], out_dir: str) -> tuple[int, int]:
    """Writes the usable synonym entries as a METEOR ``-d`` directory.

    Returns:
      (exceptions entries kept, synsets entries kept).
    """
    runs = text_runs(texts)
    run_ok = np.zeros(len(self.runs), bool)
    for r in runs | _tail_runs(runs):
      i = self.runs.get(r)
      if i is not None:
        run_ok[i] = True
    keep_pair = _all_ok(run_ok, self.key_run_ids, self.key_run_offsets)
    exc_parts = []
    for base, forms, form_runs, base_pairs in self.exceptions:
      if any(all(r in runs for r in fr) for fr in form_runs):
        exc_parts.append(f"{base}\n{forms}\n")
        keep_pair[base_pairs] = True
    kept = np.nonzero(keep_pair)[0]
    o = self.pair_offsets
    syn = b"".join(self.synsets[o[i] : o[i + 1]] for i in kept.tolist())
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, f"{_SYN_LANG}.synsets"), "wb") as f:
      f.write(syn)
    with open(os.path.join(out_dir, f"{_SYN_LANG}.exceptions"), "w", encoding="utf-8") as f:
      f.write("".join(exc_parts))
    # Never read by METEOR 1.5, but its URL is built.
    open(os.path.join(out_dir, f"{_SYN_LANG}.relations"), "wb").close()
    return len(exc_parts), len(kept)


def _tail_runs(runs: Iterable[str]) -> set[str]:
  """What morph's suffix replacements can turn a word's last run into."""
  out = {"ful"}
  for r in runs:
    for suffix, replacement in _MORPH:
      if r.endswith(suffix):
        tail = r[: len(r) - len(suffix)] + replacement
        out.add(tail)
        out.add(tail + "ful")
    if r.endswith("ful"):
      out.add(r)
  return out


_INDEX = {}
_KEYS = {}


def content_key(path: str) -> str:
  """Hex digest naming the cache entry of `path` by its content.

  Every virtualenv installs its own copy of the jar and table (new
  mtimes), so a key of size and mtime built a new ~250 MB index per
  install; SHA-1 of the 62 MB table takes ~0.07 s, once per process.
  """
  st = os.stat(path)
  memo = (os.path.realpath(path), st.st_size, st.st_mtime_ns)
  if memo not in _KEYS:
    digest = hashlib.sha1()
    with open(path, "rb") as f:
      for block in iter(lambda: f.read(1 << 22), b""):
        digest.update(block)
    _KEYS[memo] = f"{st.st_size}_{digest.hexdigest()[:20]}"
  return _KEYS[memo]


def clear_loaded() -> None:
  """Forgets the indexes loaded in this process (the disk cache stays)."""
  _INDEX.clear()


def load_synonyms(jar: str | None = None) -> SynonymIndex:
  """The (cached) synonym index of `jar`, building it on first use."""
  jar = jar or java_lib.meteor_jar()
  directory = os.path.join(cache_root(), f"meteor_synonyms_v{_VERSION}_{content_key(jar)}")
  if directory not in _INDEX:
    if not os.path.isfile(os.path.join(directory, "exceptions.json")):
      SynonymIndex.build(jar, directory)
    _INDEX[directory] = SynonymIndex(directory)
  return _INDEX[directory]


def load_index(table: str | None = None) -> ParaphraseIndex:
  """The (cached) index of `table`, building it on first use."""
  table = table or default_table()
  directory = os.path.join(cache_root(), f"meteor_paraphrase_v{_VERSION}_{content_key(table)}")
  if directory not in _INDEX:
    if not os.path.isfile(os.path.join(directory, "vocab.txt")):
      ParaphraseIndex.build(table, directory)
    _INDEX[directory] = ParaphraseIndex(directory)
  return _INDEX[directory]
