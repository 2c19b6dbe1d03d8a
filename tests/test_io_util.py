"""Atomic writes leave either the complete new file or nothing, never a partial one."""

import json
import os

import pytest

from relations import io_util


def test_json_roundtrip_and_replace(tmp_path):
  path = str(tmp_path / "sub" / "m.json")
  io_util.write_json_atomic(path, {"a": 1})
  io_util.write_json_atomic(path, {"a": 2})
  with open(path) as f:
    assert json.load(f) == {"a": 2}
  assert os.listdir(tmp_path / "sub") == ["m.json"]


def test_failed_write_leaves_old_file_and_no_temp(tmp_path):
  path = str(tmp_path / "m.json")
  io_util.write_json_atomic(path, {"ok": True})
  with pytest.raises(TypeError):
    io_util.write_json_atomic(path, {"bad": object()})
  with open(path) as f:
    assert json.load(f) == {"ok": True}
  assert os.listdir(tmp_path) == ["m.json"]
