"""The shape of tidemq's code (issue 29's goals): functions over 60 lines, classes over 30 methods,
and runtime import cycles, counted from the source with ``ast`` (nothing is imported).

* a function's length is its ``def`` line through its last line (docstring included, decorators
  not: a click command's options are not its body), nested functions counted on their own as well;
* a class's methods are the functions defined directly in its body;
* a runtime import is a module-level ``import`` / ``from ... import`` of a ``tidemq`` module
  (inside ``if TYPE_CHECKING:`` or inside a function does not count); a cycle is a strongly
  connected component of more than one module in that graph.

Prints the lists and one JSON line ``{"functions_over_60": N, "classes_over_30": N,
"import_cycles": N, ...}``. Run: ``python -m bench.code_shape [--root tidemq] [--limit 60]``.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path
from typing import Any


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """``tidemq`` modules imported at module level (not under TYPE_CHECKING)."""
    found: set[str] = set()
    pkg = module if is_package else module.rpartition(".")[0]

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("tidemq"))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = pkg.split(".")
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                if base.startswith("tidemq"):
                    found.add(base)
                    found.update(f"{base}.{a.name}" for a in node.names)
            elif isinstance(node, ast.If) and not _is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)

    visit(tree.body)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def measure(root: Path, limit: int = 60, max_methods: int = 30) -> dict[str, Any]:
    """The figures for every ``*.py`` under ``root`` (module docstring)."""
    long_functions: list[tuple[int, str]] = []
    big_classes: list[tuple[int, str]] = []
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        module = _module_name(path, root)
        graph[module] = _runtime_imports(tree, module, path.name == "__init__.py")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > limit:
                    long_functions.append((length, f"{path}:{node.lineno} {node.name}"))
            elif isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > max_methods:
                    big_classes.append((len(methods), f"{path}:{node.lineno} {node.name}"))
    modules = set(graph)
    graph = {m: {d for d in deps if d in modules and d != m} for m, deps in graph.items()}
    cycles = _cycles(graph)
    return {
        "functions_over_limit": sorted(long_functions, reverse=True),
        "classes_over_limit": sorted(big_classes, reverse=True),
        "import_cycles": cycles,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="tidemq")
    ap.add_argument("--limit", type=int, default=60, help="longest function allowed, lines")
    ap.add_argument("--max-methods", type=int, default=30)
    args = ap.parse_args()
    res = measure(Path(args.root), args.limit, args.max_methods)
    for length, where in res["functions_over_limit"]:
        print(f"function {length:4d} lines  {where}")
    for count, where in res["classes_over_limit"]:
        print(f"class    {count:4d} methods {where}")
    for cycle in res["import_cycles"]:
        print(f"cycle    {' <-> '.join(cycle)}")
    print(
        json.dumps(
            {
                "bench": "code_shape",
                f"functions_over_{args.limit}": len(res["functions_over_limit"]),
                f"classes_over_{args.max_methods}": len(res["classes_over_limit"]),
                "import_cycles": len(res["import_cycles"]),
            }
        )
    )


if __name__ == "__main__":
    main()
