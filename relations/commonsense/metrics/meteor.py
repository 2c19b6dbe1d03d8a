"""Corpus METEOR 1.5 equal to pycocoevalcap 1.2 ``Meteor()``, in parallel.

pycocoevalcap starts one ``java -jar -Xmx2G meteor-1.5.jar - - -stdio -l en
-norm`` process, sends one ``SCORE ||| ref_1 ||| ... ||| ref_k ||| hyp`` line
per item and reads back a line of sufficient statistics, then sends
``EVAL ||| stats_1 ||| ... ||| stats_N`` and reads N sentence scores and the
corpus score (METEOR aggregates the statistics; it is not a mean of sentence
scores).

The statistics of an item depend only on its SCORE line, so we:
* build exactly the same SCORE lines, send each distinct line once,
* normalise the lines of a simple, verified class (plain words and PTB
  clitics; see prenormalise) in Python and send them to processes started
  with ``-lower`` instead of ``-norm`` (the only difference between the two
  modes is the Normalizer.normalizeLine call, which is more than half of
  METEOR's CPU time); other lines go as they are to ``-norm`` processes,
* split them over several METEOR processes (one per core) in chunks that
  each process pulls when it is done with the previous one, streaming the
  lines of a chunk instead of one blocking round trip per line,
* aggregate the N statistics ourselves and let the jar score the aggregate.

Why the aggregate is exact (meteor-1.5.jar as shipped, read with javap):
EVAL parses every ``stats_i`` into a MeteorStats (23 doubles: lengths,
function words, 4 stages x (test, ref) x (content, function) matches,
chunks, word matches; the total matches are the sum of the stage matches),
adds it to an empty aggregate with ``MeteorStats.addStats`` and finally runs
``MeteorScorer.computeMetrics`` on the aggregate, which reads only those
fields.  ``addStats`` adds every field, except that a segment's chunks are
skipped when it matches completely (total matches == length on both sides)
in exactly one chunk.  SCORE prints integer counts, so every field is an
integer-valued double and every partial sum is an integer far below 2**53:
the Java sums are exact and equal our integer sums.  ``SING ||| stats`` (a
command of the same jar) parses one statistics line and prints
``computeMetrics`` of it, i.e. the score of an identical aggregate.  If any
statistics line is not 23 integers, we send the full EVAL line instead.

Most of METEOR's start-up time (several CPU-seconds per process) is reading
the 60 MB paraphrase table and the WordNet synonym files; by default each
process instead reads the exact corpus-specific subsets built by
``paraphrase.py``.

tests/commonsense/metrics/test_meteor.py checks each shortcut against the
jar's own answer and the whole against pycocoevalcap.
"""

import collections
import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
from typing import Sequence

from relations.commonsense.metrics import java as java_lib
from relations.commonsense.metrics import paraphrase

_METEOR_ARGS = ("-", "-", "-stdio", "-l", "en")
# pycocoevalcap's normalisation flag, and the one we use for text that we
# normalised already (see prenormalise).
_NORM, _LOWER = "-norm", "-lower"
# JVM tuning only (no effect on results; Java floating point is strict):
# the C1 JIT and the serial GC roughly halve METEOR's CPU time on corpora
# of ~10^4 lines compared with the default tiered C2 + G1 (measured).
_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


_CHUNK = 64  # SCORE lines per chunk (~20 ms of METEOR work).
_NUM_STATS = 23  # MeteorStats.STATS_LENGTH.
_CHUNKS = 20  # Index of the chunk count in a statistics line.
_EXACT_LIMIT = 2**53


def aggregate_stats(stats_lines: Sequence[str]) -> str | None:
  """The statistics line of the EVAL aggregate of `stats_lines`.

  Follows ``MeteorStats(String)`` + ``addStats`` (see module docstring).

  Returns:
    23 space-separated integers formatted as Java prints doubles ("12.0"),
    or None if a line is not 23 integer-valued numbers (then only the jar's
    own EVAL is exact).
  """
  total = [0] * _NUM_STATS
  # Integer sums do not depend on order: parse each distinct line once.
  for line, count in collections.Counter(stats_lines).items():
    fields = line.split()
    if len(fields) != _NUM_STATS:
      return None
    values = []
    for f in fields:
      try:
        v = float(f)
      except ValueError:
        return None
      if not v.is_integer() or not 0 <= v < _EXACT_LIMIT:
        return None
      values.append(int(v))
    test_matches = sum(values[4 + 4 * i] + values[6 + 4 * i] for i in range(4))
    ref_matches = sum(values[5 + 4 * i] + values[7 + 4 * i] for i in range(4))
    if test_matches == values[0] and ref_matches == values[1] and values[_CHUNKS] == 1:
      values[_CHUNKS] = 0  # addStats skips the chunk of a perfect match.
    for k in range(_NUM_STATS):
      total[k] += count * values[k]
  if max(total) >= _EXACT_LIMIT:
    return None
  return " ".join(f"{v}.0" for v in total)


def _clean_hyp(hyp: str) -> str:
  """The hypothesis as ``Meteor._stat`` puts it into a SCORE line."""
  return hyp.replace("|||", "").replace("  ", " ")


def score_line(hyp: str, refs: Sequence[str]) -> str:
  """The SCORE line pycocoevalcap's ``Meteor._stat`` writes (no newline)."""
  return " ||| ".join(("SCORE", " ||| ".join(refs), _clean_hyp(hyp)))


_PLAIN_SEGMENT = re.compile(r"[a-z0-9' ]*")
_PLAIN_WORD = re.compile(r"[a-z0-9]+")


def prenormalise(segment: str) -> str | None:
  """METEOR's ``-norm`` normalisation of one segment, for a verified class.

  Normalizer.normalizeLine (meteor-1.5.jar, English) leaves words of ASCII
  lower-case letters and digits alone; of its rules only two apply to the
  clitics PTB tokenisation produces: r_cont_en2 splits "'s" (any "'" +
  letters after a space) into "' s", r_cont_en4 splits "n't" into
  "n 't"; then words are re-joined by single spaces.  (No dots, commas,
  quotes, dashes or other symbols occur in the class, and no "'" follows a
  digit or another "'".)  Java's trim() of a segment strips its spaces.

  Returns:
    The normalised segment, or None if `segment` is outside the class
    (anything but space-separated ``[a-z0-9]+``, ``'[a-z]+`` and ``n't``).
  """
  if not _PLAIN_SEGMENT.fullmatch(segment):
    return None
  out = []
  for word in segment.split():
    if _PLAIN_WORD.fullmatch(word):
      out.append(word)
    elif word[0] == "'" and len(word) > 1 and word[1:].isalpha():
      out += ["'", word[1:]]
    elif word == "n't":
      out += ["n", "'t"]
    else:
      return None
  return " ".join(out)


def prenormalised_line(hyp: str, refs: Sequence[str], cache: dict | None = None) -> str | None:
  """score_line(hyp, refs) with normalised segments, or None (see above).

  `cache` (segment -> prenormalise(segment)) saves work on references,
  which repeat for every sample of an event.
  """
  if cache is None:
    cache = {}
  segments = []
  for seg in (*refs, _clean_hyp(hyp)):
    norm = cache.get(seg, False)
    if norm is False:
      norm = cache[seg] = prenormalise(seg)
    if norm is None:
      return None
    segments.append(norm)
  return " ||| ".join(("SCORE", *segments))


class _Worker:
  """One METEOR process in -stdio mode."""

  def __init__(
    self,
    java: str,
    jar: str,
    paraphrase_file: str | None,
    synonym_dir: str | None = None,
    mode: str = _NORM,
  ):
    cmd = [java, *_JVM_FLAGS, "-jar", "-Xmx2G", jar, *_METEOR_ARGS, mode]
    if paraphrase_file is not None:
      cmd += ["-a", paraphrase_file]
    if synonym_dir is not None:
      cmd += ["-d", synonym_dir]
    self.proc = subprocess.Popen(
      cmd,
      cwd=os.path.dirname(jar),
      stdin=subprocess.PIPE,
      stdout=subprocess.PIPE,
      stderr=subprocess.PIPE,
    )

  def query(self, lines: Sequence[str], n_out: int) -> list[str]:
    """Writes `lines` (streamed by a thread) and reads `n_out` answers."""
    error = []

    def write():
      try:
        for start in range(0, len(lines), 512):
          chunk = "".join(l + "\n" for l in lines[start : start + 512])
          self.proc.stdin.write(chunk.encode())
        self.proc.stdin.flush()
      except (BrokenPipeError, OSError) as e:  # Reported below.
        error.append(e)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    out = [self._readline(error) for _ in range(n_out)]
    writer.join()
    return out

  def _readline(self, error) -> str:
    line = self.proc.stdout.readline()
    if not line:
      raise RuntimeError(
        "METEOR process ended early: " + self.proc.stderr.read().decode()[-2000:] + repr(error)
      )
    return line.decode().strip()

  def stream(self, claim, results: list) -> None:
    """Scores chunks from `claim()` until it returns None (blocking).

    A writer thread keeps the pipe to METEOR full, claiming the next chunk
    (k, lines) whenever the previous one is written, so the process never
    waits for Python and no process is left with a long queue at the end;
    this thread reads the answers into results[k].
    """
    order = queue.Queue()
    error = []

    def write():
      try:
        while True:
          item = claim()
          if item is None:
            break
          order.put((item[0], len(item[1])))
          self.proc.stdin.write("".join(l + "\n" for l in item[1]).encode())
          self.proc.stdin.flush()
      except (BrokenPipeError, OSError) as e:  # Reported by the reader.
        error.append(e)
      finally:
        order.put(None)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    while True:
      item = order.get()
      if item is None:
        break
      k, n = item
      results[k] = [self._readline(error) for _ in range(n)]
    writer.join()
    if error:
      raise RuntimeError(f"writing to METEOR failed: {error[0]!r}")

  def close(self):
    try:
      self.proc.stdin.close()
    except OSError:
      pass
    self.proc.kill()
    self.proc.wait()


# Relative METEOR CPU time of a "-norm" line vs a pre-normalised one
# (measured: 2.0 vs 0.9 CPU-s for the bench's 7,494 lines).
_NORM_COST = 2.3


def _worker_counts(workers: int, n_norm: int, n_lower: int) -> dict:
  """Processes per mode, `workers` in all (one more for a small rest)."""
  if not n_norm:
    return {_LOWER: workers}
  if not n_lower:
    return {_NORM: workers}
  share = _NORM_COST * n_norm / (_NORM_COST * n_norm + n_lower)
  n = min(workers - 1, round(share * workers))
  if n <= 0:  # Few lines need the jar's normaliser: one extra process.
    return {_LOWER: workers, _NORM: 1}
  return {_LOWER: workers - n, _NORM: n}


class CorpusMeteor:
  """A corpus METEOR computation running in the background.

  The constructor does the Python work (SCORE lines, paraphrase filter) in
  the calling thread, starts the METEOR processes and streams the SCORE
  lines to them from background threads; ``result()`` waits for the
  statistics and returns the corpus score.  Arguments as corpus_meteor.
  """

  def __init__(
    self,
    hyps: Sequence[str],
    refs: Sequence[Sequence[str]],
    workers: int | None = None,
    filter_paraphrases: bool = True,
    full_eval: bool = False,
    filter_synonyms: bool = True,
    prenormalise_ok: bool = True,
  ):
    if len(hyps) != len(refs):
      raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
    if not hyps:
      raise ValueError("no items to score")
    java = java_lib.java_executable(f"METEOR 1.5 ({len(hyps)} hypotheses)")
    jar = java_lib.meteor_jar()
    self._full_eval = full_eval
    self._lines = [score_line(h, r) for h, r in zip(hyps, refs)]
    # Distinct lines, each with the text we send: pre-normalised for a
    # "-lower" process where we can (METEOR's regex normaliser is more
    # than half of its CPU time), as is for a "-norm" process otherwise.
    first = {}
    for i, line in enumerate(self._lines):
      first.setdefault(line, i)
    self._unique = unique = list(first)
    send = {_NORM: [], _LOWER: []}
    self._sent = {_NORM: [], _LOWER: []}  # Original lines, in send order.
    cache = {}
    for line, i in first.items():
      norm = prenormalised_line(hyps[i], refs[i], cache) if prenormalise_ok else None
      mode = _NORM if norm is None else _LOWER
      send[mode].append(line if norm is None else norm)
      self._sent[mode].append(line)
    if workers is None:
      workers = max(1, min(os.cpu_count() or 1, len(unique) // 1000))
    workers = max(1, min(workers, len(unique)))
    counts = _worker_counts(workers, len(send[_NORM]), len(send[_LOWER]))
    self._tmp_dir = tempfile.mkdtemp(prefix="meteor_")
    self._procs = []
    self._threads = []
    self._results = {}
    self._failures = []
    try:
      paraphrase_file = None
      if filter_paraphrases:
        paraphrase_file = os.path.join(self._tmp_dir, "paraphrase-filtered.gz")
        paraphrase.load_index().filter(unique, paraphrase_file)
      synonym_dir = None
      if filter_synonyms:
        synonym_dir = os.path.join(self._tmp_dir, "synonyms")
        paraphrase.load_synonyms(jar).filter(unique, synonym_dir)
      for mode, n_procs in counts.items():
        procs = [_Worker(java, jar, paraphrase_file, synonym_dir, mode) for _ in range(n_procs)]
        self._procs += procs
        self._results[mode] = self._start(procs, send[mode])
    except BaseException:
      self.close()
      raise

  def _start(self, procs, lines):
    """Streams `lines` to `procs`; returns the (filled later) result list.

    Small chunks, pulled by whichever process has room (see _Worker.stream):
    the processes share the cores with the Python metrics, so a static
    split would leave one of them idle at the end.
    """
    size = max(1, min(_CHUNK, len(lines) // (8 * len(procs))))
    starts = list(range(0, len(lines), size))
    results = [None] * len(starts)
    pending = iter(starts)
    lock = threading.Lock()

    def claim():
      with lock:
        if self._failures:
          return None
        start = next(pending, None)
      if start is None:
        return None
      return start // size, lines[start : start + size]

    def run(proc):
      try:
        proc.stream(claim, results)
      except Exception as e:  # pylint: disable=broad-except
        self._failures.append(e)

    for p in procs:
      t = threading.Thread(target=run, args=(p,), daemon=True)
      t.start()
      self._threads.append(t)
    return results

  def result(self) -> float:
    """Waits for the statistics; the corpus score (float in [0, 1])."""
    try:
      for t in self._threads:
        t.join()
      if self._failures:
        raise self._failures[0]
      stats = {}
      for mode, results in self._results.items():
        stats.update(zip(self._sent[mode], (s for r in results for s in r)))
      all_stats = [stats[l] for l in self._lines]
      aggregate = None if self._full_eval else aggregate_stats(all_stats)
      if aggregate is None:
        eval_line = "EVAL" + "".join(" ||| " + s for s in all_stats)
        answer = self._procs[0].query([eval_line], len(all_stats) + 1)
      else:
        answer = self._procs[0].query(["SING ||| " + aggregate], 1)
      return float(answer[-1])
    finally:
      self.close()

  def close(self) -> None:
    """Ends the METEOR processes (idempotent)."""
    for p in self._procs:
      p.close()
    self._procs = []
    shutil.rmtree(self._tmp_dir, ignore_errors=True)


def corpus_meteor(
  hyps: Sequence[str],
  refs: Sequence[Sequence[str]],
  workers: int | None = None,
  filter_paraphrases: bool = True,
  full_eval: bool = False,
  filter_synonyms: bool = True,
  prenormalise_ok: bool = True,
) -> float:
  """Corpus METEOR as pycocoevalcap ``Meteor().compute_score`` returns it.

  Args:
    hyps: one tokenised hypothesis per item.
    refs: per item, a non-empty list of tokenised references.
    workers: METEOR processes to run (default: one per CPU core, fewer for
      small inputs since each process needs a few seconds to start).
    filter_paraphrases: give METEOR only the paraphrase-table entries that
      can match this corpus (exact; see paraphrase.py).  False: the jar's
      full default ``data/paraphrase-en.gz``, as pycocoevalcap.
    full_eval: send the jar pycocoevalcap's full EVAL line instead of the
      aggregated statistics (same result; for tests).
    filter_synonyms: give METEOR only the WordNet synonym entries that can
      match this corpus (exact; see paraphrase.SynonymIndex).  False: the
      jar's own synonym files.
    prenormalise_ok: send lines of the class prenormalise() handles
      normalised already, to "-lower" processes (exact; see there).
      False: every line to "-norm" processes, as pycocoevalcap.

  Returns:
    The corpus METEOR score (float in [0, 1]).

  Raises:
    java.JavaNotFoundError: no `java` on PATH.
  """
  return CorpusMeteor(
    hyps, refs, workers, filter_paraphrases, full_eval, filter_synonyms, prenormalise_ok
  ).result()
