"""The four TFDS builders give the same examples on Apache Beam as in one process.

For each dataset's synthetic release (the synthetic generators, or the builder's dummy_data where
the dataset has no generator):
  - example level: every split's `(key, serialized example)` from the plain generator equals what
    the Beam PTransform yields on the FnApiRunner (same keys, same bytes of every feature);
  - prepared files: `download_and_prepare` with Beam options writes the same split sizes and the
    same records, in the same order, as without (what `tfds build --beam_pipeline_options=...`
    does), and one build runs on two worker processes of the FnApiRunner (the engine of the
    DirectRunner, named directly as in the README's one-machine command); every Beam build's
    completeness counters (`tfds_util.BeamOrGenerator`) match the split sizes;
plus the registry (`tfds build --imports relations.datasets`), `relations.datasets.prepare`, and
reading a prepared dataset from a data_dir that must not be written to.

Beam runs name `FnApiRunner`, never `DirectRunner`: Beam 2.77's DirectRunner first tries the
Prism runner, which needs a download; without network that fails after creating a
`beam-temp*` directory (and `beam-requirements-cache`, `tmp*`) in the system temp directory that
nothing removes (15 per run of this module). `_no_temp_leak` runs every test with its own temp
directory and fails a test that leaves anything but TFDS's own empty `tmp*tfds` directories.
"""

import hashlib
import os
import pickle
import subprocess
import sys
import tempfile

import apache_beam as beam
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from apache_beam.options import pipeline_options
from array_record.python import array_record_module
from tensorflow_datasets.core import example_serializer

import relations.datasets
from relations import tfds_util
from relations.commonsense.data import synthetic as commonsense_synthetic
from relations.commonsense.data.visualcomet import (
  visualcomet_dataset_builder as visualcomet,
)
from relations.datasets import prepare
from relations.occlusion.data import synthetic as occlusion_synthetic
from relations.occlusion.data.occlusion_boundaries import (
  make_dummy_data as occlusion_dummy,
)
from relations.occlusion.data.occlusion_boundaries import (
  occlusion_boundaries_dataset_builder as occlusion,
)
from relations.video_relations.data import synthetic as vidor_synthetic
from relations.video_relations.data.vidor import vidor_dataset_builder as vidor
from relations.video_relations.data.vidvrd import vidvrd_dataset_builder as vidvrd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VIDVRD_DUMMY = os.path.join(os.path.dirname(vidvrd.__file__), "dummy_data")
ONE_PROCESS = ["--runner=FnApiRunner"]
TWO_WORKERS = [
  "--runner=FnApiRunner",
  "--direct_running_mode=multi_processing",
  "--direct_num_workers=2",
]


@pytest.fixture(autouse=True)
def _no_temp_leak(tmp_path_factory, monkeypatch):
  """Each test gets its own temp directory (also for subprocesses), empty again at the end."""
  tmp = tmp_path_factory.mktemp("tempdir")
  monkeypatch.setattr(tempfile, "tempdir", str(tmp))
  monkeypatch.setenv("TMPDIR", str(tmp))
  yield
  # TFDS 4.9.10 itself leaves one empty `tmp*tfds` directory per builder of a dataset that is
  # not prepared yet (`DatasetInfo.initialize_from_bucket`); those stay in pytest's directory.
  leaked = sorted(n for n in os.listdir(tmp) if not n.endswith("tfds"))
  assert not leaked, f"left behind in the temp directory {tmp}: {leaked}"


def _serializer(builder):
  features = builder.info.features
  serializer = example_serializer.ExampleSerializer(features.get_serialized_info())
  return lambda kv: (kv[0], serializer.serialize_example(features.encode_example(kv[1])))


def _dump(key_serialized, out):
  """Writes one (key, serialized example) to its own file (collects Beam output in tests)."""
  name = hashlib.sha1(repr(key_serialized[0]).encode()).hexdigest()
  with open(os.path.join(out, name), "wb") as f:
    pickle.dump(key_serialized, f)


def _generated(builder, manual, tmp_path, use_beam):
  """{split: {key: serialized example}} from `_generate_examples`, plain or on Beam."""
  dl = tfds.download.DownloadManager(
    download_dir=str(tmp_path / "dl"),
    manual_dir=str(manual),
    manual_dir_instructions=builder.MANUAL_DOWNLOAD_INSTRUCTIONS,
  )
  builder._use_beam = use_beam  # What `download_and_prepare` sets from the DownloadConfig.
  try:
    gens = builder._split_generators(dl)
  finally:
    builder._use_beam = False
  serialize = _serializer(builder)
  if not use_beam:
    out = {}
    for split, gen in gens.items():
      assert not isinstance(gen, beam.PTransform)
      pairs = [serialize(kv) for kv in gen]
      out[split] = dict(pairs)
      assert len(out[split]) == len(pairs), f"{split}: duplicated keys"
    return out
  dirs = {split: tmp_path / f"beam_{split}" for split in gens}
  with beam.Pipeline(options=pipeline_options.PipelineOptions(ONE_PROCESS)) as p:
    for split, transform in gens.items():
      assert isinstance(transform, beam.PTransform), type(transform)
      dirs[split].mkdir()
      _ = (
        p
        | split >> transform
        | f"{split}_serialize" >> beam.Map(serialize)
        | f"{split}_dump" >> beam.Map(_dump, out=str(dirs[split]))
      )
  out = {}
  for split, d in dirs.items():
    pairs = [pickle.loads(f.read_bytes()) for f in sorted(d.iterdir())]
    out[split] = dict(pairs)
  return out


def _features(serialized: bytes) -> dict[str, bytes]:
  """Feature name -> the bytes of that feature in a serialized tf.train.Example.

  Records are compared per feature: protobuf (upb) writes the feature map in an order that
  changes from process to process, so the same example serialized by two processes (even two
  plain builds) can differ as a whole record while every feature's bytes are equal.
  """
  feature = tf.train.Example.FromString(serialized).features.feature
  return {name: feature[name].SerializeToString() for name in sorted(feature)}


def _assert_same_examples(plain, on_beam):
  assert sorted(plain) == sorted(on_beam)
  for split in plain:
    assert len(plain[split]) > 0
    assert sorted(plain[split], key=repr) == sorted(on_beam[split], key=repr), split
    for key, serialized in plain[split].items():
      a, b = _features(serialized), _features(on_beam[split][key])
      assert a == b, (
        split,
        key,
        "features differ:",
        sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k)),
      )


def _prepare(cls, manual, data_dir, config, beam_flags=None):
  builder = cls(data_dir=str(data_dir), config=config, file_format="array_record")
  download_config = tfds.download.DownloadConfig(manual_dir=str(manual))
  if beam_flags is not None:
    download_config.beam_options = pipeline_options.PipelineOptions(beam_flags)
  builder.download_and_prepare(download_config=download_config)
  return builder


def _stored_records(builder, split):
  out = []
  for path in builder.info.splits[split].filepaths:
    reader = array_record_module.ArrayRecordReader(os.fspath(path))
    out.extend(reader.read_all())
    reader.close()
  return out


def _check(cls, manual, tmp_path, config, prepare_flags=tuple(ONE_PROCESS)):
  """Example-level and prepared-file equality of the plain and the Beam build."""
  plain = _generated(
    cls(data_dir=str(tmp_path / "g0"), config=config), manual, tmp_path / "gen_plain", False
  )
  on_beam = _generated(
    cls(data_dir=str(tmp_path / "g1"), config=config), manual, tmp_path / "gen_beam", True
  )
  _assert_same_examples(plain, on_beam)

  a = _prepare(cls, manual, tmp_path / "plain", config)
  b = _prepare(cls, manual, tmp_path / "beam", config, list(prepare_flags))
  assert {s: v.num_examples for s, v in a.info.splits.items()} == {
    s: len(ex) for s, ex in plain.items()
  }
  assert {s: v.num_examples for s, v in b.info.splits.items()} == {
    s: v.num_examples for s, v in a.info.splits.items()
  }
  # The completeness check ran on real counters: every item once, every example written.
  assert a.beam_counts is None
  assert b.beam_counts == {
    s: {"items": b._beam_expected_items[s], "examples": len(ex)} for s, ex in plain.items()
  }
  for split in plain:
    ra = [_features(r) for r in _stored_records(a, split)]
    rb = [_features(r) for r in _stored_records(b, split)]
    assert len(ra) == len(rb) == len(plain[split])
    # Records are stored in the order of their keys' hashes on both paths.
    assert ra == rb, f"{split}: stored records differ (content or order)"
    by_id = lambda recs: sorted(recs, key=lambda f: sorted(f.items()))
    assert by_id(ra) == by_id([_features(r) for r in plain[split].values()])
    assert a.info.splits[split].num_bytes == b.info.splits[split].num_bytes
  return plain


# ------------------------------------------------------------------------------- per dataset


@pytest.mark.slow
def test_vidor_synthetic_same_on_beam(tmp_path):
  manual = tmp_path / "vidor_syn"
  vidor_synthetic.generate(
    str(manual), num_train=3, num_val=2, seed=3, width=96, height=64, min_frames=20, max_frames=30
  )
  plain = _check(vidor.Builder, manual, tmp_path, "fps6_short96")
  assert {s: len(v) for s, v in plain.items()} == {"train": 3, "validation": 2}


@pytest.mark.slow
def test_vidvrd_dummy_release_same_on_beam(tmp_path):
  plain = _check(vidvrd.Builder, VIDVRD_DUMMY, tmp_path, "fps6_short96")
  assert {s: len(v) for s, v in plain.items()} == {"train": 2, "test": 1}


@pytest.mark.slow
def test_occlusion_realoob_synthetic_same_on_two_beam_workers(tmp_path):
  manual = tmp_path / "realoob_syn"
  occlusion_synthetic.write_dataset(
    str(manual), num_train=4, num_test=2, num_hard_negatives=2, seed=1, size=(40, 56)
  )
  # The prepared build runs on two FnApiRunner worker processes (what the README's one-machine
  # command uses): the per-item function and the builder's inputs travel to other processes.
  plain = _check(occlusion.Builder, manual, tmp_path, "realoob", prepare_flags=TWO_WORKERS)
  assert {s: len(v) for s, v in plain.items()} == {"train": 6, "test": 2}
  assert sorted(plain["train"]) == ["hardneg_00000", "hardneg_00001"] + [
    f"train_{i:05d}" for i in range(4)
  ]


@pytest.mark.slow
@pytest.mark.parametrize("config", ["piod", "bsds_ownership"])
def test_occlusion_dummy_releases_same_on_beam(tmp_path, config):
  plain = _check(occlusion.Builder, os.path.join(occlusion_dummy.HERE, config), tmp_path, config)
  assert all(len(v) > 0 for v in plain.values())


@pytest.mark.slow
@pytest.mark.parametrize("config", ["training_features", "generation"])
def test_visualcomet_synthetic_same_on_beam(tmp_path, config):
  manual = tmp_path / "vc_syn"
  commonsense_synthetic.generate(
    str(manual),
    seed=2,
    train_images=3,
    val_images=2,
    test_images=2,
    image_size=48,
    vocab_size=300,
    verbose=False,
  )
  plain = _check(visualcomet.Builder, manual, tmp_path, config)
  # Shuffling is disabled: keys are the expansion indices 0..n-1 of each split.
  for examples in plain.values():
    assert sorted(examples) == list(range(len(examples)))


# ------------------------------------------------------------------------------- registry, CLI


def test_registry_registers_all_four_builders():
  assert set(relations.datasets.BUILDERS) == {
    "occlusion_boundaries",
    "vidor",
    "vidvrd",
    "visualcomet",
  }
  for name, cls in relations.datasets.BUILDERS.items():
    assert tfds.builder_cls(name) is cls
    assert issubclass(cls, tfds_util.BeamOrGenerator)


def test_prepare_list(capsys):
  assert prepare.main(["--list"]) == 0
  lines = capsys.readouterr().out.splitlines()
  assert lines[2] == "vidvrd: fps6_short96, fps4_short224, fps2_short224, fps1_short320"
  assert len(lines) == 4


@pytest.mark.slow
def test_tfds_build_cli_with_beam_options(tmp_path):
  """The standard CLI, as in the README: registry import, manual_dir, config, Beam options."""
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
  data_dir = tmp_path / "tfds"
  tfds_cli = os.path.join(os.path.dirname(sys.executable), "tfds")  # The console script.
  cmd = [
    tfds_cli,
    "build",
    "--imports",
    "relations.datasets",
    "vidvrd",
    "--config",
    "fps6_short96",
    "--manual_dir",
    VIDVRD_DUMMY,
    "--data_dir",
    str(data_dir),
    "--file_format",
    "array_record",
    "--beam_pipeline_options=runner=FnApiRunner",
  ]
  r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
  assert r.returncode == 0, r.stderr[-3000:]
  b = vidvrd.Builder(data_dir=str(data_dir), config="fps6_short96")
  assert {s: v.num_examples for s, v in b.info.splits.items()} == {"train": 2, "test": 1}
  ref = _prepare(vidvrd.Builder, VIDVRD_DUMMY, tmp_path / "ref", "fps6_short96")
  for split in ("train", "test"):
    assert [_features(r) for r in _stored_records(b, split)] == [
      _features(r) for r in _stored_records(ref, split)
    ]


def test_prepared_elsewhere_is_only_read(tmp_path):
  """Training opens a dataset built by another machine without writing into its data_dir."""
  data_dir = tmp_path / "bucket"
  _prepare(vidvrd.Builder, VIDVRD_DUMMY, data_dir, "fps6_short96", ONE_PROCESS)

  def snapshot():
    return sorted(
      (os.path.relpath(os.path.join(d, f), data_dir), os.stat(os.path.join(d, f)).st_mtime_ns)
      for d, _, files in os.walk(data_dir)
      for f in files
    )

  before = snapshot()
  os.chmod(data_dir, 0o555)
  try:
    b = tfds_util.ensure_built(
      vidvrd.Builder, str(data_dir), manual_dir=None, config="fps6_short96"
    )
    ex = b.as_data_source("test")[0]
  finally:
    os.chmod(data_dir, 0o755)
  assert ex["video_id"] == b"ILSVRC2015_test_00000000"
  assert np.asarray(ex["tracks"]["boxes"]).ndim == 3
  assert snapshot() == before


def test_prepared_in_another_file_format_says_how_to_fix(tmp_path):
  b = vidvrd.Builder(data_dir=str(tmp_path), config="fps6_short96", file_format="tfrecord")
  b.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=VIDVRD_DUMMY))
  with pytest.raises(
    ValueError,
    match=r"vidvrd \(config fps6_short96\) in .* was prepared as "
    r"another file format .*--file_format array_record.*tfds convert_format",
  ):
    tfds_util.ensure_built(vidvrd.Builder, str(tmp_path), None, config="fps6_short96")


# ------------------------------------------------------------------------------- completeness


class _Counter:
  def __init__(self, name, committed, attempted=None):
    self.key = type("Key", (), {"metric": type("Metric", (), {"name": name})()})()
    self.committed, self.attempted = committed, attempted


class _Result:
  def __init__(self, counters):
    self._counters = counters

  def metrics(self):
    counters = self._counters
    return type("Metrics", (), {"query": lambda self, _filter: {"counters": counters}})()


def test_beam_counts_are_read_per_split_and_summed_over_steps():
  result = _Result(
    [
      _Counter("train/items", 3),
      _Counter("train/examples", 5),
      _Counter("train/examples", 2),  # the same counter reported by a second step
      _Counter("test/items", None, attempted=1),  # a runner without committed values
      _Counter("test/examples", None, attempted=4),
    ]
  )
  assert tfds_util.read_beam_counts(result) == {
    "train": {"items": 3, "examples": 7},
    "test": {"items": 1, "examples": 4},
  }
  assert tfds_util.read_beam_counts(_Result([])) is None


def test_lost_beam_examples_fail_the_build_with_the_counts():
  counts = {"train": {"items": 175, "examples": 175}, "test": {"items": 25, "examples": 25}}
  tfds_util.check_beam_counts(
    "occlusion_boundaries",
    {"train": 175, "test": 25},
    counts,
    {
      "train": 175,
      "test": 25,
    },
  )
  # What Beam 2.77's FnApiRunner did on two worker processes (bench data, 200 RealOOB images).
  with pytest.raises(
    tfds_util.BeamExamplesLostError,
    match=r"^occlusion_boundaries: the Beam pipeline lost data \(split train: 175 examples "
    r"generated, 153 written\)\. Nothing was kept; build again\.",
  ):
    tfds_util.check_beam_counts(
      "occlusion_boundaries", {"train": 175, "test": 25}, counts, {"train": 153, "test": 25}
    )
  with pytest.raises(
    tfds_util.BeamExamplesLostError,
    match=r"lost data \(split test: 25 items listed, 20 processed\)\.",
  ):
    tfds_util.check_beam_counts(
      "x",
      {"train": 175, "test": 25},
      {"train": counts["train"], "test": {"items": 20, "examples": 20}},
      {"train": 175, "test": 20},
    )
