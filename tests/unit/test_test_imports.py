"""The test tree's house rule, read from the source (prebake_testing.imports): a test module imports its helpers from
prebake_testing only and gets its fixtures through the conftest.py files, never by importing another test module or
a conftest (`from tests.x import ...`, `from .test_y import ...`, `import conftest`). A helper two test modules share
belongs in prebake_testing, in the module named for what it holds; a fixture several folders need, in a conftest.py
above them. prebake_testing and benchmarks/, which tests/ depend on, never import tests/ either."""

from __future__ import annotations

from pathlib import Path

import pytest

from prebake_testing import REPO
from prebake_testing.imports import Import, imports_of, module_name, within

CHECKED = ("tests", "prebake_testing", "benchmarks")


def from_the_tests(each: Import) -> bool:
    """An import of tests/ by its package name, or of a test module or conftest by its bare name (as pytest's
    rootdir-based import modes would let it through)."""
    first = each.module.split(".")[0]
    return within(each.module, "tests") or first == "conftest" or first.startswith("test_")


def imports_of_file(path: Path) -> list[Import]:
    found, _ = imports_of(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
    return found


@pytest.mark.parametrize("folder", CHECKED)
def test_no_module_imports_from_the_tests(folder):
    found = [f"{path.relative_to(REPO)}:{each.line} imports {each}"
             for path in sorted((REPO / folder).rglob("*.py")) if ".venv" not in path.parts
             for each in imports_of_file(path) if from_the_tests(each)]
    assert not found, ("a helper shared by test modules goes in prebake_testing (the module named for what it "
                       "holds), a shared fixture in a conftest.py above its users:\n" + "\n".join(found))


def test_the_rule_sees_every_spelling_of_an_import_from_the_tests():
    """The check above can fail: each way a test module could reach another is found, and nothing else is."""
    source = ("from tests.conftest import REPO\n"
              "import tests.swap.test_swap\n"
              "from tests.integration import conftest\n"
              "from .test_swap import chat\n"
              "from . import conftest\n"
              "from ..serving.test_idle_stop import IDLE_S\n"
              "import conftest\n"
              "from test_hf_offline import ORNITH\n"
              "def later():\n"
              "    importlib.import_module('tests.unit.test_runpod')\n"
              "from prebake_testing.swappod import chat\n"
              "import pytest\n"
              "from entrypoint.launcher import knobs\n")
    found, _ = imports_of(source, "tests.swap.test_swap_sleep")
    assert [each.line for each in found if from_the_tests(each)] == [1, 2, 3, 4, 5, 6, 7, 8, 10]
    assert [each.module for each in found if not from_the_tests(each)] == [
        "prebake_testing.swappod", "pytest", "entrypoint.launcher.knobs"]
