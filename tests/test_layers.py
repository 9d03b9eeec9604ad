"""The import direction of the package: cli/render/serve → front doors → checkpoint → ground floor.

Read from the source (every import, including those inside functions), so a lazy import that
climbs back up a floor, or closes a cycle, fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "nmt_cli"

# Floors, lowest first; a module may import from its own floor or below, never above.
FRONT_DOORS = {"translator", "trainer", "aligner", "training_run", "averaging", "probe"}
MIDDLE = {"checkpoint", "decoding", "loss", "validation", "updates", "train_report"}
TERMINAL = ("cli", "render")  # the only packages that know about the terminal
TERMINAL_LIBRARIES = {"typer", "rich", "click", "argparse"}
INTERFACES = (*TERMINAL, "serve")  # the terminal's packages and the HTTP service (`nmt serve`)


def _floor(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    if top in INTERFACES or top == "__main__":
        return 3
    if top in FRONT_DOORS:
        return 2
    if top in MIDDLE:
        return 1
    return 0


def _modules() -> dict[str, Path]:
    names = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        name: {m for m in _imports(path) if m in modules and m != name and m != "nmt_cli"}
        for name, path in modules.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph`, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target] if target in path else [node, target]
            if target not in state and (found := visit(target, [*path, target])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_the_package_is_read():
    graph = _graph()
    assert {"nmt_cli.translator", "nmt_cli.checkpoint", "nmt_cli.cli.app"} <= set(graph)
    assert "nmt_cli.checkpoint" in graph["nmt_cli.translator"]


def test_no_module_imports_from_a_floor_above():
    upward = sorted(
        f"{name} imports {target}"
        for name, targets in _graph().items()
        for target in targets
        if _floor(target) > _floor(name)
    )
    assert upward == []


def test_no_import_cycles():
    assert _cycle(_graph()) is None


@pytest.mark.parametrize("name", sorted(n for n in _modules() if _floor(n) < 3))
def test_the_library_neither_parses_arguments_nor_prints(name):
    path = _modules()[name]
    terminal = {m.split(".")[0] for m in _imports(path)} & TERMINAL_LIBRARIES
    assert not terminal, f"{name} imports {terminal}"
    calls = [
        node.lineno
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"
    ]
    assert calls == [], f"{name} calls print() on lines {calls}"


def test_the_checks_can_fail():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _floor("nmt_cli.cli.app") > _floor("nmt_cli.translator") > _floor("nmt_cli.checkpoint")
    assert _floor("nmt_cli.checkpoint") > _floor("nmt_cli.model.seq2seq")
