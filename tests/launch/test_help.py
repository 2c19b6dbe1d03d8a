"""`--help` of every launch script prints its usage text, and no lines of the script itself."""

import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize(
  "script",
  ["launch/tpu_pod.sh", "launch/tpu_worker.sh", "launch/slurm_gpu.sbatch", "launch/local.sh"],
)
def test_help_prints_usage_only(script):
  out = subprocess.run(
    ["bash", script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
  )
  assert out.returncode == 0 and out.stderr == ""
  code = re.compile(r"^\s*(#|set -|if \[|fi$|usage\(\)|sed -|cat <<|exec |\w+=\$|\w+\(\) \{)")
  assert not [line for line in out.stdout.splitlines() if code.match(line)], out.stdout
  assert "launch/" + os.path.basename(script) in out.stdout
