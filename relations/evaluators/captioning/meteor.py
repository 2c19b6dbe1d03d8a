"""Corpus METEOR 1.5 equal to pycocoevalcap 1.2 ``Meteor()``, in parallel.

pycocoevalcap starts one ``java -jar -Xmx2G meteor-1.5.jar - - -stdio -l en
-norm`` process, sends one ``SCORE ||| ref_1 ||| ... ||| ref_k ||| hyp`` line
per item and reads back a line of sufficient statistics, then sends
``EVAL ||| stats_1 ||| ... ||| stats_N`` and reads N sentence scores and the
corpus score (METEOR aggregates the statistics; it is not a mean of sentence
scores).

The statistics of an item depend only on its SCORE line, so we:
* build exactly the same SCORE lines, send each distinct line once,
* split them over several METEOR processes (one per core), streaming the
  lines instead of one blocking round trip per line,
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
the 60 MB paraphrase table; by default each process instead reads the exact
corpus-specific subset built by ``paraphrase.py``.
"""

import collections
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Sequence

from relations.evaluators.captioning import java as java_lib
from relations.evaluators.captioning import paraphrase

_METEOR_ARGS = ("-", "-", "-stdio", "-l", "en", "-norm")
# JVM tuning only (no effect on results; Java floating point is strict):
# the C1 JIT and the serial GC roughly halve METEOR's CPU time on corpora
# of ~10^4 lines compared with the default tiered C2 + G1 (measured).
_JVM_FLAGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


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
    if (test_matches == values[0] and ref_matches == values[1] and
        values[_CHUNKS] == 1):
      values[_CHUNKS] = 0  # addStats skips the chunk of a perfect match.
    for k in range(_NUM_STATS):
      total[k] += count * values[k]
  if max(total) >= _EXACT_LIMIT:
    return None
  return " ".join(f"{v}.0" for v in total)


def score_line(hyp: str, refs: Sequence[str]) -> str:
  """The SCORE line pycocoevalcap's ``Meteor._stat`` writes (no newline)."""
  hyp = hyp.replace("|||", "").replace("  ", " ")
  return " ||| ".join(("SCORE", " ||| ".join(refs), hyp))


class _Worker:
  """One METEOR process in -stdio mode."""

  def __init__(self, java: str, jar: str, paraphrase_file: str | None):
    cmd = [java, *_JVM_FLAGS, "-jar", "-Xmx2G", jar, *_METEOR_ARGS]
    if paraphrase_file is not None:
      cmd += ["-a", paraphrase_file]
    self.proc = subprocess.Popen(
        cmd, cwd=os.path.dirname(jar), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)

  def query(self, lines: Sequence[str], n_out: int) -> list[str]:
    """Writes `lines` (streamed by a thread) and reads `n_out` answers."""
    error = []

    def write():
      try:
        for start in range(0, len(lines), 512):
          chunk = "".join(l + "\n" for l in lines[start:start + 512])
          self.proc.stdin.write(chunk.encode())
        self.proc.stdin.flush()
      except (BrokenPipeError, OSError) as e:  # Reported below.
        error.append(e)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    out = []
    for _ in range(n_out):
      line = self.proc.stdout.readline()
      if not line:
        raise RuntimeError(
            "METEOR process ended early: "
            + self.proc.stderr.read().decode()[-2000:] + repr(error))
      out.append(line.decode().strip())
    writer.join()
    return out

  def close(self):
    try:
      self.proc.stdin.close()
    except OSError:
      pass
    self.proc.kill()
    self.proc.wait()


def corpus_meteor(hyps: Sequence[str], refs: Sequence[Sequence[str]],
                  workers: int | None = None,
                  filter_paraphrases: bool = True,
                  full_eval: bool = False) -> float:
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

  Returns:
    The corpus METEOR score (float in [0, 1]).

  Raises:
    java.JavaNotFoundError: no `java` on PATH.
  """
  if len(hyps) != len(refs):
    raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} reference lists")
  if not hyps:
    raise ValueError("no items to score")
  java = java_lib.java_executable(f"METEOR 1.5 ({len(hyps)} hypotheses)")
  jar = java_lib.meteor_jar()
  lines = [score_line(h, r) for h, r in zip(hyps, refs)]
  unique = list(dict.fromkeys(lines))
  if workers is None:
    workers = max(1, min(os.cpu_count() or 1, len(unique) // 1000))
  workers = max(1, min(workers, len(unique)))
  tmp_dir = tempfile.mkdtemp(prefix="meteor_")
  procs = []
  try:
    paraphrase_file = None
    if filter_paraphrases:
      paraphrase_file = os.path.join(tmp_dir, "paraphrase-filtered.gz")
      paraphrase.load_index().filter(unique, paraphrase_file)
    procs = [_Worker(java, jar, paraphrase_file) for _ in range(workers)]
    # Contiguous chunks of roughly equal total length.
    bounds = [round(i * len(unique) / workers) for i in range(workers + 1)]
    chunks = [unique[bounds[i]:bounds[i + 1]] for i in range(workers)]
    results = [None] * workers
    failures = []

    def run(i):
      try:
        results[i] = procs[i].query(chunks[i], len(chunks[i]))
      except Exception as e:  # pylint: disable=broad-except
        failures.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    if failures:
      raise failures[0]
    stats = {}
    for chunk, res in zip(chunks, results):
      stats.update(zip(chunk, res))
    all_stats = [stats[l] for l in lines]
    aggregate = None if full_eval else aggregate_stats(all_stats)
    if aggregate is None:
      eval_line = "EVAL" + "".join(" ||| " + s for s in all_stats)
      answer = procs[0].query([eval_line], len(lines) + 1)
    else:
      answer = procs[0].query(["SING ||| " + aggregate], 1)
    return float(answer[-1])
  finally:
    for p in procs:
      p.close()
    shutil.rmtree(tmp_dir, ignore_errors=True)
