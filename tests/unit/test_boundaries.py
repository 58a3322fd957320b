"""The walls between the processes, read from the source: what each module imports, as `ast` sees it.

- the bridge (entrypoint/serving/) never imports the launcher (entrypoint/launcher/), nor the reverse: what crosses
  between the two processes is entrypoint/contract.py (docs/entrypoint.md);
- the modules both processes share (entrypoint/*.py but the two process scripts) and the vLLM plugin import neither;
- the build side (prebake/) imports from entrypoint/ only the contract, the launcher's public module
  (launcher/podcheck.py) and the shared modules named in BUILD_SIDE_MAY_IMPORT;
- every import in those trees can be read: `import`, `from ... import` (relative too), and `importlib.import_module`
  or `__import__` with a literal name; one with a computed name is refused, since no check could see through it.
- the router pod's program (routerpod/) runs alone in its own image: it imports nothing of the repository, and
  nothing in entrypoint/ imports it (the one header both sides know is entrypoint/contract.py's, copied and checked);
prebake/incontainer/ is the image's self-test, sent into the image to check its launcher and bridge there, as tests/
do here: it reads the image's entrypoint package through one door (programs/entrypoint_door.py, the one computed
import of it, naming the modules it reads), and nowhere else, not even in a script string it runs.
Every file git knows is read for sys.path edits, in code and in script strings: the files that hold one run outside
the installed package, each named with why in SYS_PATH_EDITS_ALLOWED; everything else imports by package name.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

from prebake_testing.imports import first_cycle, imports_of, module_name, within

REPO = Path(__file__).resolve().parent.parent.parent
ENTRYPOINT = REPO / "entrypoint"
ROUTER_POD = REPO / "routerpod"
# What the repository holds as packages: the router pod's image has none of them beside its own program.
REPOSITORY_PACKAGES = ("entrypoint", "prebake", "prebake_testing", "routerpod")
PROCESS_SCRIPTS = {"entrypoint.launch": "entrypoint.launcher", "entrypoint.bridge": "entrypoint.serving"}
BUILD_SIDE_MAY_IMPORT = {
    "entrypoint.contract": "what crosses between the processes, and RunPod's URL rule",
    "entrypoint.launcher.podcheck": "the launcher's public checks of a template's environment",
    "entrypoint.runpodapi": "RunPod's REST shapes, shared with the pod's idle stop",
    "entrypoint.claudecode": "the settings block for Claude Code",
    "entrypoint.safetext": "the one rule for outside text shown on a terminal (RunPod's answers)",
    "entrypoint.redact": "a RunPod key masked in RunPod's answers, whole or cut",
}
IN_CONTAINER = REPO / "prebake" / "incontainer"
DOOR = "prebake.incontainer.programs.entrypoint_door"
# Imports whose module name is data, each with why no check needs to see through it.
COMPUTED_ON_PURPOSE = {
    DOOR: "the self-test's one door to the image's entrypoint package, whose folder is known at run time",
    "prebake.incontainer.checks.imports": "the lock's key distributions' modules, from the spec: never entrypoint/",
    "prebake.incontainer.programs.zygote": "the zygote's preload (PRELOAD, third-party modules): never entrypoint/",
}
# A line of a script string that imports the entrypoint package (a child Python's `-c`).
SCRIPT_IMPORT = re.compile(r"^\s*(from|import)\s+entrypoint\b", re.MULTILINE)


def modules(folder: Path) -> dict[str, Path]:
    return {module_name(path): path for path in sorted(folder.rglob("*.py")) if ".venv" not in path.parts}


def violations(checked: Path | dict[str, Path], allowed) -> list[str]:
    """`file:line imports X` for each import of a module under a folder (or of those given by name) that
    `allowed(importer, imported)` refuses."""
    found = []
    for importer, path in (modules(checked) if isinstance(checked, Path) else checked).items():
        imported, _ = imports_of(path.read_text(encoding="utf-8"), importer, path.name == "__init__.py")
        found += [f"{path.relative_to(REPO)}:{each.line} imports {each}" for each in imported
                  if not allowed(importer, each.module)]
    return found


def assert_none(found: list[str], rule: str) -> None:
    assert not found, f"{rule}:\n" + "\n".join(found)


def test_the_bridge_never_imports_the_launcher():
    assert_none(violations(ENTRYPOINT / "serving", lambda _, module: not within(module, "entrypoint.launcher")),
                "the bridge learns the launcher's decisions from the contract (state.json, its arguments), never "
                "from the launcher's modules")


def test_the_launcher_never_imports_the_bridge():
    assert_none(violations(ENTRYPOINT / "launcher", lambda _, module: not within(module, "entrypoint.serving")),
                "what the launcher shares with the bridge belongs in entrypoint/contract.py")


def test_the_shared_modules_and_the_plugin_import_neither_process():
    def allowed(importer: str, module: str) -> bool:
        own = PROCESS_SCRIPTS.get(importer)
        return not any(within(module, side) for side in ("entrypoint.launcher", "entrypoint.serving") if side != own)

    shared = {name: path for name, path in modules(ENTRYPOINT).items()
              if not any(within(name, side) for side in ("entrypoint.launcher", "entrypoint.serving"))}
    assert "entrypoint.contract" in shared and "entrypoint.vllm_plugin.prebake_thinking.hooks" in shared
    assert_none(violations(shared, allowed), "a module both processes use imports neither")


def test_the_build_side_imports_only_the_contract_and_the_launchers_public_module():
    def allowed(_: str, module: str) -> bool:
        return not within(module, "entrypoint") or any(within(module, name) for name in BUILD_SIDE_MAY_IMPORT)

    assert_none(violations(REPO / "prebake", allowed), "prebake/ asks the launcher through launcher/podcheck.py; "
                "a shared module it needs goes in BUILD_SIDE_MAY_IMPORT, with the reason")


@pytest.mark.parametrize("folder", ["entrypoint", "prebake", "routerpod", "benchmarks/gpu"])
def test_every_import_can_be_read(folder):
    """A computed name in importlib.import_module or __import__ would pass every check above unseen."""
    unreadable = []
    for importer, path in modules(REPO / folder).items():
        if importer in COMPUTED_ON_PURPOSE:
            continue
        _, lines = imports_of(path.read_text(encoding="utf-8"), importer, path.name == "__init__.py")
        unreadable += [f"{path.relative_to(REPO)}:{line}" for line in lines]
    assert_none(unreadable, "imports with a computed module name: import the module by name")


def test_the_reader_sees_every_kind_of_import():
    """The checks above can fail: each spelling of an import of the launcher from the bridge is found."""
    source = ("import entrypoint.launcher.knobs\n"
              "from ..launcher import marker\n"
              "from ..launcher.report import LaunchError\n"
              "def later():\n"
              "    from ..launcher.idlestop import decide_idle_stop\n"
              "    importlib.import_module('entrypoint.launcher.main')\n"
              "    __import__('entrypoint.launcher.probe')\n"
              "    importlib.import_module('..launcher.access', package='entrypoint.serving')\n"
              "    importlib.import_module(f'entrypoint.{name}')\n")
    found, unreadable = imports_of(source, "entrypoint.serving.monitor")
    assert [each.module for each in found] == [
        "entrypoint.launcher.knobs", "entrypoint.launcher.marker", "entrypoint.launcher.report",
        "entrypoint.launcher.idlestop", "entrypoint.launcher.main", "entrypoint.launcher.probe",
        "entrypoint.launcher.access"]
    assert unreadable == [9]
    assert module_name(ENTRYPOINT / "launcher" / "__init__.py") == "entrypoint.launcher"
    in_package, _ = imports_of("from . import knobs\n", "entrypoint.launcher", is_package=True)
    assert [each.module for each in in_package] == ["entrypoint.launcher.knobs"]


def test_no_process_of_the_pod_imports_the_router_pods_program():
    """routerpod/router.py runs alone in the router pod's image; the header it sends every pod is the contract's.
    The bridge, the launcher and what they share (all of entrypoint/) never import it: the pod's image has no
    routerpod/."""
    from entrypoint.contract import NO_START_HOLD_HEADER
    from routerpod.router import NO_START_HOLD_HEADER as SENT

    assert SENT == NO_START_HOLD_HEADER
    assert {"entrypoint.serving.relay", "entrypoint.launcher.main"} <= set(modules(ENTRYPOINT))
    assert_none(violations(ENTRYPOINT, lambda _, module: not within(module, "routerpod")),
                "what the bridge shares with the router pod belongs in entrypoint/contract.py")


def test_the_router_pods_program_imports_nothing_of_the_repository():
    """Its image copies router.py alone: an import of entrypoint/ (the contract included: router.py keeps a checked
    copy of its header), prebake/ or another module of routerpod/ would fail there, not here."""
    assert "routerpod.router" in modules(ROUTER_POD)
    assert_none(violations(ROUTER_POD, lambda _, module: not any(within(module, name) for name in REPOSITORY_PACKAGES)),
                "routerpod/router.py runs alone in the router image: it imports the standard library only")


def test_the_router_pods_check_sees_an_import_of_the_contract():
    found, _ = imports_of("import os\nfrom entrypoint.contract import NO_START_HOLD_HEADER\n", "routerpod.router")
    assert [each.module for each in found if any(within(each.module, n) for n in REPOSITORY_PACKAGES)] == [
        "entrypoint.contract"]


def import_graph(folder: Path) -> dict[str, list[str]]:
    """Each module of `folder` -> the modules of `folder` it imports, at module level, inside a function or under
    `if TYPE_CHECKING:` (Python never runs that one, but a type that names a module which names this one back is
    the same knot: two modules that need each other's words)."""
    graph = {}
    names = modules(folder)
    for importer, path in names.items():
        imported, _ = imports_of(path.read_text(encoding="utf-8"), importer, path.name == "__init__.py")
        graph[importer] = sorted({each.module for each in imported if each.module in names and each.module != importer})
    return graph


def test_no_import_cycle_in_the_entrypoint():
    """Two modules that import each other (one of them hidden in a function, or for annotations only) are one module
    in two files: what both need goes to one of them, or to a third."""
    cycle = first_cycle(import_graph(ENTRYPOINT))
    assert cycle is None, "an import cycle in entrypoint/: " + " -> ".join(cycle or ())


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import():
    source = "from .b import x\ndef later():\n    from .a import y\n"
    found, _ = imports_of(source, "entrypoint.launcher.b")
    assert [each.module for each in found] == ["entrypoint.launcher.b", "entrypoint.launcher.a"]
    graph = {"p.a": ["p.b"], "p.b": ["p.c"], "p.c": ["p.a"], "p.d": ["p.a"]}
    assert first_cycle(graph) == ["p.a", "p.b", "p.c", "p.a"]
    assert first_cycle({"p.a": ["p.b"], "p.b": [], "p.c": ["p.a", "p.b"]}) is None
    annotation_only, _ = imports_of("if TYPE_CHECKING:\n    from .a import A\n", "entrypoint.launcher.b")
    assert [each.module for each in annotation_only] == ["entrypoint.launcher.a"]  # counted: a knot all the same


GPU_HARNESS = REPO / "benchmarks" / "gpu"


def bare_sibling_imports(source: str, importer: str, siblings: set[str]) -> list[str]:
    """`line imports X` for each import of a sibling module by its bare name (`import procwatch`), which only
    resolves with the module's own folder on sys.path."""
    imported, _ = imports_of(source, importer)
    return list(dict.fromkeys(f"{each.line} imports {each}" for each in imported
                              if each.module.split(".")[0] in siblings))


# A string that edits sys.path as a script would: `sys.path.insert(`, `sys.path[0] =`, `del sys.path[0]`...; a string
# that only names it (an error message, "a sys.path edit") is prose.
SYS_PATH_EDIT_IN_A_STRING = re.compile(
    r"\bdel\s+sys\.path\b|\bsys\.path\s*(\.\s*(insert|append|extend|pop|remove|clear)\s*\(|(\[[^\]\n]*\])?\s*\+?=(?!=))")


def sys_path_edits(source: str) -> list[int]:
    """The lines of `source` that touch `sys.path`: in code, each line that names it (`from sys import path` too);
    in a string, each line that edits it (a script a child Python or a container runs). Docstrings are prose."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name) \
                and node.value.id == "sys":
            lines.add(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" and any(a.name == "path" for a in node.names):
            lines.add(node.lineno)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and SYS_PATH_EDIT_IN_A_STRING.search(node.value):
            written = ast.get_source_segment(source, node) or ""  # as written, so that its lines are the file's
            lines.update([node.lineno + written[:found.start()].count("\n")
                          for found in SYS_PATH_EDIT_IN_A_STRING.finditer(written)] or [node.lineno])
    return sorted(lines)


def test_the_gpu_harness_imports_its_modules_by_their_package_names():
    """benchmarks/gpu/ is one package, benchmarks.gpu: its modules import each other and the repository by package
    names, as the tests import them (the one path set-up is harness.py's: SYS_PATH_EDITS_ALLOWED)."""
    siblings = {path.stem for path in GPU_HARNESS.glob("*.py")}
    bare = []
    for importer, path in modules(GPU_HARNESS).items():
        source = path.read_text(encoding="utf-8")
        bare += [f"{path.relative_to(REPO)}:{each}" for each in bare_sibling_imports(source, importer, siblings)]
    assert_none(bare, "import a module of the GPU harness as benchmarks.gpu.NAME")
    cycle = first_cycle(import_graph(GPU_HARNESS))
    assert cycle is None, "an import cycle in benchmarks/gpu/: " + " -> ".join(cycle or ())


def test_the_harness_check_sees_a_bare_sibling_import():
    planted = "import procwatch\nfrom benchmarks.gpu import peak_run\n"
    assert bare_sibling_imports(planted, "benchmarks.gpu.planted", {"procwatch", "peak_run"}) == [
        "1 imports procwatch"]


# Every sys.path edit of the repository, in code or in a script string, is in one of these files, each a place that
# runs outside the installed package: file -> (its lines that edit sys.path, why). Issue 58: at most 13 in all.
SYS_PATH_EDITS_ALLOWED = {
    "entrypoint/launch.py": (1, "the image runs it as `python /opt/prebake/entrypoint/launch.py`: the package's "
                                "parent goes on the path in place of the script's folder, whose modules would shadow"),
    "entrypoint/bridge.py": (1, "the launcher runs it as a script in the image, as launch.py is run"),
    "prebake/incontainer/programs/zygote.py": (1, "in the image: a forked child becomes `python PROGRAM`, whose "
                                                  "folder goes first on the path as Python's own start puts it"),
    "prebake/incontainer/programs/entrypoint_door.py": (2, "in the image: the self-test's one door imports the "
                                                           "image's entrypoint package from a folder known at run time"),
    "benchmarks/gpu/harness.py": (1, "the GPU machine runs it from a plain checkout, nothing of it installed"),
    "tests/unit/test_boundaries.py": (4, "PLANTED, the walker's own test: parsed, never run"),
}
SYS_PATH_EDITS_AT_MOST = 13
INSTEAD = ("import the module by its package name (prebake.X, entrypoint.X, benchmarks.X: the venv has them "
           "installed), or give the child process PYTHONPATH (subprocess's env=, a container's environment); "
           "a file that truly runs outside the installed package goes in SYS_PATH_EDITS_ALLOWED, with why")


def unallowed_sys_path_edits(sources: dict[str, str], allowed: dict[str, tuple[int, str]]) -> list[str]:
    """`file:line` for each sys.path edit in a file `allowed` does not name, and each named file whose count of
    edits is not the one `allowed` says (an edit added, or one gone and the count left behind)."""
    found = []
    for name, source in sources.items():
        lines = sys_path_edits(source)
        if name not in allowed:
            found += [f"{name}:{line} edits sys.path" for line in lines]
        elif len(lines) != allowed[name][0]:
            found.append(f"{name}: {len(lines)} lines edit sys.path ({', '.join(map(str, lines)) or 'none'}), "
                         f"SYS_PATH_EDITS_ALLOWED says {allowed[name][0]}")
    found += [f"{name}: in SYS_PATH_EDITS_ALLOWED but no such file" for name in allowed if name not in sources]
    return found


def repository_sources() -> dict[str, str]:
    """Every .py file git knows here (tracked, or new and not ignored) -> its text."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout
    paths = sorted({name for name in listed.split("\0") if name and (REPO / name).is_file()})
    return {name: (REPO / name).read_text(encoding="utf-8") for name in paths}


def test_every_sys_path_edit_is_in_a_file_that_runs_outside_the_installed_package():
    sources = repository_sources()
    assert "entrypoint/launch.py" in sources and "benchmarks/gpu/harness.py" in sources
    assert_none(unallowed_sys_path_edits(sources, SYS_PATH_EDITS_ALLOWED), f"a sys.path edit: {INSTEAD}")
    total = sum(count for count, _ in SYS_PATH_EDITS_ALLOWED.values())
    assert total <= SYS_PATH_EDITS_AT_MOST, f"{total} sys.path edits, more than {SYS_PATH_EDITS_AT_MOST}: {INSTEAD}"


PLANTED = '''import sys
sys.path.insert(0, "x")
from sys import path
SCRIPT = "import json, sys; sys.path[:0] = ['/repo']; import prebake"
BOOT = f"import sys; sys.path.append({HERE!r})"
MESSAGE = "a sys.path edit is refused"
def f():
    """An example, not run: del sys.path[0]."""
    return sys.path
'''


def test_the_walker_sees_each_sys_path_edit_in_code_and_in_script_strings():
    assert sys_path_edits(PLANTED) == [2, 3, 4, 5, 9]  # the message and the docstring are prose
    found = unallowed_sys_path_edits({"planted.py": PLANTED, "kept.py": PLANTED, "grown.py": PLANTED},
                                     {"kept.py": (5, "why"), "grown.py": (4, "why"), "gone.py": (1, "why")})
    assert found == [f"planted.py:{line} edits sys.path" for line in (2, 3, 4, 5, 9)] + [
        "grown.py: 5 lines edit sys.path (2, 3, 4, 5, 9), SYS_PATH_EDITS_ALLOWED says 4",
        "gone.py: in SYS_PATH_EDITS_ALLOWED but no such file"]


def test_the_router_pods_copy_of_claude_codes_session_header_is_claude_codes():
    """routerpod/router.py keys its affinity on Claude Code's session header with a copy of its own (it runs alone in
    its image); the copy is the one room's, and the nginx configuration it writes names that header."""
    from entrypoint.claudecode_wire import SESSION_HEADER
    from routerpod.router import CLAUDE_CODE_SESSION_HEADER, SESSION_VARIABLE

    assert CLAUDE_CODE_SESSION_HEADER.encode() == SESSION_HEADER
    assert SESSION_VARIABLE == "$http_x_claude_code_session_id"


def script_imports(source: str) -> list[int]:
    """The lines of string constants in `source` that import the entrypoint package (a script a child Python runs)."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and SCRIPT_IMPORT.search(node.value)]


def test_the_self_test_reads_the_images_entrypoint_only_through_its_door():
    from prebake.incontainer.programs.entrypoint_door import MODULES, image_module

    crossings = []
    for importer, path in modules(IN_CONTAINER).items():
        if importer == DOOR:
            continue
        source = path.read_text(encoding="utf-8")
        imported, _ = imports_of(source, importer, path.name == "__init__.py")
        crossings += [f"{path.relative_to(REPO)}:{each.line} imports {each}" for each in imported
                      if within(each.module, "entrypoint")]
        crossings += [f"{path.relative_to(REPO)}:{line} runs a script that imports entrypoint"
                      for line in script_imports(source)]
    assert_none(crossings, "the self-test reads the image's launcher, bridge and vLLM facts through "
                "prebake/incontainer/programs/entrypoint_door.py (image_module, vllm_facts, child_command)")
    missing = [name for name in sorted(MODULES) if not (ENTRYPOINT / (name.replace(".", "/") + ".py")).is_file()]
    assert not missing, f"entrypoint_door.MODULES names modules entrypoint/ lacks: {missing}"
    with pytest.raises(ValueError, match="entrypoint_door.MODULES"):
        image_module(str(ENTRYPOINT), "launcher.supervise")


def test_the_door_check_sees_a_script_string_that_imports_the_entrypoint():
    source = 'PROBE = """\nimport json\nfrom entrypoint.serving.auth import INSIDE_ONLY\n"""\nTEXT = "the entrypoint"\n'
    assert script_imports(source) == [1]
