"""Config parsing: typed variant args, locked configs, overrides that name bad keys."""

import textwrap

import pytest

from relations.train import config_util
from relations.train import cli


@pytest.fixture
def cfg_file(tmp_path):
  path = tmp_path / "cfg.py"
  path.write_text(
    textwrap.dedent("""
      import ml_collections
      from relations.train.config_util import parse_arg

      def get_config(arg=None):
        arg = parse_arg(arg, variant="Ti/16", tiny=False, steps=100, lr=0.1)
        c = ml_collections.ConfigDict()
        c.variant = arg.variant
        c.total_steps = 10 if arg.tiny else arg.steps
        c.schedule = dict(lr=arg.lr, decay="cosine")
        c.name = "x"
        return c
      """)
  )
  return str(path)


def test_variant_args_are_typed(cfg_file):
  c = config_util.load_config(cfg_file + ":variant=B/16,steps=7,lr=2")
  assert (c.variant, c.total_steps, c.schedule.lr) == ("B/16", 7, 2.0)
  assert isinstance(c.schedule.lr, float)
  assert config_util.load_config(cfg_file + ":tiny").total_steps == 10
  # A bare value sets the first key.
  assert config_util.load_config(cfg_file + ":S/32").variant == "S/32"


def test_unknown_variant_key_names_the_key(cfg_file):
  with pytest.raises(ValueError, match="'stepz'"):
    config_util.load_config(cfg_file + ":stepz=3")


def test_wrong_type_names_the_key(cfg_file):
  with pytest.raises(ValueError, match="'steps' expects an int"):
    config_util.load_config(cfg_file + ":steps=many")
  with pytest.raises(ValueError, match="'tiny' expects a bool"):
    config_util.load_config(cfg_file + ":tiny=maybe")


def test_overrides_apply_with_types(cfg_file):
  c = config_util.load_config(cfg_file, ["schedule.lr=3", "name=y", "total_steps=5"])
  assert c.schedule.lr == 3.0 and c.name == "y" and c.total_steps == 5


def test_misspelled_override_fails_loudly(cfg_file):
  with pytest.raises(ValueError, match="'schedule.lrr'"):
    config_util.load_config(cfg_file, ["schedule.lrr=3"])
  with pytest.raises(ValueError, match="'schedul'"):
    config_util.load_config(cfg_file, ["schedul.lr=3"])


def test_override_of_wrong_type_fails(cfg_file):
  with pytest.raises(ValueError, match="total_steps"):
    config_util.load_config(cfg_file, ["total_steps='ten'"])


def test_cli_collects_overrides():
  args, ov = cli.parse(
    ["--config", "c.py:tiny", "--workdir", "w", "--config.a.b=1", "--config.c", "2"], "x"
  )
  assert args.config == "c.py:tiny" and ov == ["a.b=1", "c=2"]


def test_missing_config_file_is_named():
  with pytest.raises(FileNotFoundError, match="nope.py"):
    config_util.load_config("configs/nope.py:tiny")
