"""The demo's one-screen summary flattens nested task metrics and skips stage timings."""

from relations import demo


def test_summary_flattens_and_skips_task_timings(capsys):
  summary = {
    "occlusion": {
      "seconds": {"total": 9.0},
      "model": {"B-ODS": 0.5},
      "canny": {"B-ODS": 0.25},
      "wall_seconds": 12.0,
    },
    "video_relations": {"error": "failed (see above)", "wall_seconds": 3.0},
    "total_seconds": 15.0,
  }
  demo.print_summary(summary, ["occlusion", "video_relations"], "/w")
  out = capsys.readouterr().out
  assert "occlusion  [12 s]" in out and "video_relations  [3 s]" in out
  assert "model/B-ODS" in out and "0.5000" in out and "canny/B-ODS" in out
  assert "seconds/total" not in out and "error" in out


def test_flatten():
  assert demo._flatten({"a": {"b": 1, "c": {"d": 2}}, "e": 3}) == {"a/b": 1, "a/c/d": 2, "e": 3}
