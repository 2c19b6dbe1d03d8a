"""Evaluators with `during_training=False` never run inside `trainer.train` (only when
`relations.predict --eval NAME` asks for them), the others run as configured."""

import os

import pytest

from relations.train import config_util, trainer


@pytest.mark.slow
def test_during_training_false_evaluator_is_skipped(tmp_path, capsys):
  c = config_util.load_config("tests/toy_task.py", ["total_steps=2", "checkpoint_every=2"])
  with c.unlocked():
    c.evals = dict(
      every=dict(type="tests.scripted_evaluator", every_steps=1),
      blind=dict(type="tests.scripted_evaluator", every_steps=1, during_training=False),
    )
  workdir = str(tmp_path / "w")
  result = trainer.train(c, workdir)
  assert result.step == 2
  # The scripted evaluator marks each evaluation it starts with a file.
  assert sorted(os.listdir(os.path.join(workdir, "eval", "every"))) == ["started_1", "started_2"]
  assert not os.path.exists(os.path.join(workdir, "eval", "blind", "started_2"))
  out = capsys.readouterr().out
  assert "[eval] every at step 2" in out and "[eval] blind" not in out
