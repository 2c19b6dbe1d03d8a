"""The package layout's dependency rules, read from the import statements of every module.

- The core (everything in `relations` outside the task packages and the entry points) imports no
  task.
- Tasks do not import each other.
- A task's `metrics/` (the model-free official scorers others reuse) reaches, directly or through
  other modules, neither a model nor the trainer.
- A task split into `model/` (what trains) and `inference/` (what turns outputs into
  submissions) keeps the halves apart: neither imports the other, and `inference/` reaches no
  trainer (the predictor is handed a model, it never builds one).
- No import cycles between modules (imports inside functions count too).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "relations"
TASKS = ("occlusion", "video_relations", "commonsense")
# Entry points and the dataset registry may import every task; nothing imports them.
ENTRY = ("relations.evaluate", "relations.predict", "relations.demo", "relations.datasets")
# Modules a scorer must not reach: the trainer, the shared network layers, and each task's model,
# losses, decoding and trainer glue (video_relations' heads and losses live under its `model/`).
MODEL_OR_TRAINER = ("relations.train", "relations.nn") + tuple(
  f"relations.{task}.{name}"
  for task in TASKS
  for name in (
    "model",
    "task",
    "evaluator",
    "demo",
    "losses",
    "gpt2",
    "gpt2_import",
    "generation",
  )
)


def _module_name(path: pathlib.Path) -> str:
  parts = path.relative_to(ROOT.parent).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _within(name: str, prefix: str) -> bool:
  return name == prefix or name.startswith(prefix + ".")


def _imports(path: pathlib.Path, modules: set[str]) -> set[str]:
  """The `relations` modules `path` imports (`from pkg import mod` resolves to `pkg.mod`)."""
  name = _module_name(path)
  package = name if path.name == "__init__.py" else name.rpartition(".")[0]
  found = set()
  for node in ast.walk(ast.parse(path.read_text(), str(path))):
    if isinstance(node, ast.Import):
      targets = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(
          package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
        )
      targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
    else:
      continue
    for target in targets:
      while target and target not in modules:  # `import a.b.c` of an attribute -> a.b
        target = target.rpartition(".")[0]
      if target.startswith("relations") and target != name:
        found.add(target)
  return found


def _graph() -> dict[str, set[str]]:
  paths = sorted(ROOT.rglob("*.py"))
  modules = {_module_name(p) for p in paths}
  return {_module_name(p): _imports(p, modules) for p in paths}


GRAPH = _graph()


def _task_of(name: str) -> str | None:
  parts = name.split(".")
  return parts[1] if len(parts) > 1 and parts[1] in TASKS else None


def _is_entry(name: str) -> bool:
  return any(_within(name, e) for e in ENTRY)


def test_graph_sees_the_packages():
  # Guards the reader itself: if it found nothing, every rule below would pass vacuously.
  assert "relations.train.trainer" in GRAPH["relations.occlusion.evaluator"] or any(
    _within(m, "relations.train")
    for m in GRAPH["relations.occlusion.task"]
    | GRAPH["relations.occlusion.evaluator"]
    | GRAPH["relations.occlusion.demo"]
  )
  assert "relations.occlusion.model" in GRAPH["relations.occlusion.task"]
  assert all(_task_of(f"relations.{t}.task") == t for t in TASKS)


def test_core_imports_no_task():
  bad = {
    m: sorted(i for i in deps if _task_of(i) or _is_entry(i))
    for m, deps in GRAPH.items()
    if not _task_of(m) and not _is_entry(m)
  }
  assert not {m: d for m, d in bad.items() if d}


def test_tasks_do_not_import_each_other():
  bad = {
    m: sorted(i for i in deps if _task_of(i) not in (None, _task_of(m)) or _is_entry(i))
    for m, deps in GRAPH.items()
    if _task_of(m)
  }
  assert not {m: d for m, d in bad.items() if d}


def _reachable(start: str) -> set[str]:
  seen, todo = set(), [start]
  while todo:
    for dep in GRAPH.get(todo.pop(), ()):
      if dep not in seen:
        seen.add(dep)
        todo.append(dep)
  return seen


@pytest.mark.parametrize("task", TASKS)
def test_metrics_reach_no_model_and_no_trainer(task):
  scorers = [m for m in GRAPH if _within(m, f"relations.{task}.metrics")]
  assert scorers
  bad = {
    m: sorted(r for r in _reachable(m) if any(_within(r, f) for f in MODEL_OR_TRAINER))
    for m in scorers
  }
  assert not {m: r for m, r in bad.items() if r}


def test_model_and_inference_stay_apart():
  split = [t for t in TASKS if (ROOT / t / "model").is_dir() and (ROOT / t / "inference").is_dir()]
  assert split == ["video_relations"]  # the rule must not pass vacuously
  bad = {}
  for task in split:
    model, inference = f"relations.{task}.model", f"relations.{task}.inference"
    for m, deps in GRAPH.items():
      if _within(m, model):
        bad[m] = sorted(d for d in deps if _within(d, inference))
      elif _within(m, inference):
        bad[m] = sorted(
          r for r in _reachable(m) if _within(r, model) or _within(r, "relations.train")
        )
  assert not {m: d for m, d in bad.items() if d}


def test_no_import_cycles():
  # Tarjan's strongly connected components; any component of two or more modules is a cycle.
  index, low, stack, on_stack, cycles = {}, {}, [], set(), []

  def visit(v):
    index[v] = low[v] = len(index)
    stack.append(v)
    on_stack.add(v)
    for w in GRAPH.get(v, ()):
      if w not in index:
        visit(w)
        low[v] = min(low[v], low[w])
      elif w in on_stack:
        low[v] = min(low[v], index[w])
    if low[v] == index[v]:
      component = []
      while True:
        w = stack.pop()
        on_stack.discard(w)
        component.append(w)
        if w == v:
          break
      if len(component) > 1:
        cycles.append(sorted(component))

  for v in sorted(GRAPH):
    if v not in index:
      visit(v)
  assert not cycles


def test_tree_is_formatted():
  # One formatter for the whole tree (ruff format, configured in pyproject.toml): a change that
  # is not formatted fails here rather than in review.
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  result = subprocess.run(
    [sys.executable, "-m", "ruff", "format", "--check", "."],
    cwd=ROOT.parent,
    capture_output=True,
    text=True,
    check=False,
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]


def test_tree_passes_lint():
  # The lint rules chosen in pyproject.toml ([tool.ruff.lint]: unused and undefined names, likely
  # bugs) hold for the whole tree; `ruff check --fix` repairs most findings.
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top

  result = subprocess.run(
    [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
    cwd=ROOT.parent,
    capture_output=True,
    text=True,
    check=False,
  )
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
