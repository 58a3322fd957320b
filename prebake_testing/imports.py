"""What a Python module imports, read from its source with `ast`: `import`, `from ... import` (relative too), and
`importlib.import_module` or `__import__` with a literal name, as absolute module names; the lines of an import
with a computed name, which no check could see through. The walls between the processes
(tests/unit/test_boundaries.py) and between the test modules (tests/unit/test_test_imports.py) are read with it."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from . import REPO


@dataclass(frozen=True)
class Import:
    module: str  # absolute dotted name, a submodule where `from package import name` names one
    line: int
    dynamic: bool = False  # importlib.import_module / __import__

    def __str__(self) -> str:
        return f"{self.module}{' (importlib)' if self.dynamic else ''}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(name: str | None, level: int, importer: str, is_package: bool) -> str:
    if not level:
        return name or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _submodule(module: str, name: str) -> str:
    """`from package import name`: the submodule when there is one, else the package itself."""
    candidate = f"{module}.{name}"
    folder = REPO.joinpath(*candidate.split("."))
    return candidate if folder.with_suffix(".py").exists() or (folder / "__init__.py").exists() else module


def _dynamic_name(call: ast.Call) -> tuple[str | None, bool]:
    """(the literal name, True) of an importlib.import_module or __import__ call; (None, True) for a computed one;
    (None, False) for any other call."""
    func = call.func
    called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if called not in ("import_module", "__import__"):
        return None, False
    first = call.args[0] if call.args else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value, True
    return None, True


def imports_of(source: str, importer: str, is_package: bool = False) -> tuple[list[Import], list[int]]:
    """Every import of `source` (module `importer`) as absolute names, and the lines of imports it cannot read."""
    found, unreadable = [], []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [Import(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node.module, node.level, importer, is_package)
            found += [Import(_submodule(module, alias.name), node.lineno) for alias in node.names]
        elif isinstance(node, ast.Call):
            name, is_import = _dynamic_name(node)
            if name is not None:
                package = next((kw.value.value for kw in node.keywords if kw.arg == "package"
                                and isinstance(kw.value, ast.Constant)), None)
                if name.startswith(".") and package:
                    level = len(name) - len(name.lstrip("."))
                    name = _absolute(name.lstrip(".") or None, level, package, True)
                found.append(Import(name, node.lineno, dynamic=True))
            elif is_import:
                unreadable.append(node.lineno)
    return sorted(found, key=lambda each: each.line), sorted(unreadable)


def first_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle of `graph` (module -> the modules it imports) as [a, b, ..., a], or None: a depth-first walk."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path, on_path, stack = [start], {start}, [iter(sorted(graph.get(start, ())))]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                finished = path.pop()
                done.add(finished)
                on_path.discard(finished)
                stack.pop()
            elif following in on_path:
                return [*path[path.index(following):], following]
            elif following not in done:
                path.append(following)
                on_path.add(following)
                stack.append(iter(sorted(graph.get(following, ()))))
    return None


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")
