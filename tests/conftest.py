"""Shared fixtures: a writable copy of the test images folder, the build.py command line, and the stand-in of
RunPod's REST API (the stand-ins themselves are in prebake_testing/)."""

import os
import shutil
from pathlib import Path

import pytest

pytest.register_assert_rewrite("prebake_testing")  # before its first import: its checks fail with the values

# No test or fixture leaves a process running (prebake_testing/leftover_check.py says how it knows).
pytest_plugins = ["prebake_testing.leftover_check"]

from prebake_testing.buildpy import FIXTURE_IMAGES, run_build_py  # noqa: E402
from prebake_testing.runpod_api import schema_available, serve_runpod_api, where_to_put_it  # noqa: E402


# The tiers (README's developer section gives each one's command): a test's folder says what it needs. A test marked
# `docker` anywhere is in the Docker tier; the rest of tests/unit is the fast tier (in-process, no Docker Engine, no
# network), which every change runs.
TIER_OF_FOLDER = {
    "integration": "docker",  # a real Docker Engine: images built through build.py, containers, registries
    "launcher": "processes",  # the pod's own programs run as real processes (launcher, bridge, stand-in vLLM, nginx)
    "serving": "processes",
    "swap": "processes",
    "router": "processes",
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_runpod_schema: checks against RunPod's own v2 schema, which is not "
                            "committed (prebake_testing/runpod_api.py says where it is looked for); skipped without it")
    config.addinivalue_line("markers", "processes: runs the pod's programs as real processes (tests/ folders in "
                            "tests/conftest.py's TIER_OF_FOLDER); the fast tier is -m 'not docker and not processes'")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked needs_runpod_schema is skipped when the schema is not there, saying where to put it; a schema
    that is there but not the pinned one is an error (schema_available raises), never a skip."""
    if item.get_closest_marker("needs_runpod_schema") and not schema_available():
        pytest.skip(f"RunPod's v2 schema is not here (it is never committed): {where_to_put_it()}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test gets its tier's mark from its folder."""
    for item in items:
        tier = TIER_OF_FOLDER.get(_folder(item.nodeid))
        if tier and not item.get_closest_marker(tier):
            item.add_marker(tier)


def _folder(nodeid: str) -> str:
    """The folder under tests/ of a node id (relative to the repository: tests/serving/test_x.py::test_y)."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: no error where it is not installed (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under pytest-xdist's default distribution (README's `-n 2`): each test file runs whole on one worker (its
    module-scoped servers start once), and the Docker tier's folder is one unit, on one worker, in order: its tests
    share the session's images and one engine, and two workers would build the same tags at once."""
    if config.getvalue("dist") != "load":
        return None  # a distribution asked for by name (--dist loadfile, ...) is xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    return TierScheduling(config, log)


def xdist_unit(nodeid: str) -> str:
    """What runs whole on one worker: the Docker tier's folder, or the test's file."""
    folder = _folder(nodeid)
    return f"tests/{folder}/" if TIER_OF_FOLDER.get(folder) == "docker" else nodeid.split("::", 1)[0]


@pytest.fixture(scope="session", autouse=True)
def _state_dir(tmp_path_factory):
    """Self-test records (prebake/selftest_record.py) of this session only, not the user's: set in the
    environment so that build.py run as a subprocess uses them too."""
    os.environ["PREBAKE_STATE_DIR"] = str(tmp_path_factory.mktemp("prebake-state"))
    yield
    os.environ.pop("PREBAKE_STATE_DIR", None)


@pytest.fixture
def images_dir(tmp_path: Path) -> Path:
    """A copy of tests/fixtures/images that a test may break."""
    target = tmp_path / "images"
    shutil.copytree(FIXTURE_IMAGES, target)
    return target


@pytest.fixture
def build_py():
    return run_build_py


@pytest.fixture
def runpod():
    """The stand-in of RunPod's REST API (prebake_testing.runpod_api): its base URL, for RUNPOD_REST_URL."""
    server, url = serve_runpod_api()
    yield url
    server.shutdown()
