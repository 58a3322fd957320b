"""Shared fixtures: a writable copy of the test images folder, the build.py command line, and the stand-in of
RunPod's REST API (the stand-ins themselves are in prebake_testing/)."""

import os
import shutil
from pathlib import Path

import pytest

pytest.register_assert_rewrite("prebake_testing")  # before its first import: its checks fail with the values

# The tiers and how pytest-xdist shares the tests out (prebake_testing/tiers.py); no test or fixture leaves a process
# running (prebake_testing/leftover_check.py says how it knows); what the run made in the Docker Engine goes when the
# whole run is over (prebake_testing/engine_run.py).
pytest_plugins = ["prebake_testing.tiers", "prebake_testing.leftover_check", "prebake_testing.engine_run"]

from prebake_testing.buildpy import FIXTURE_IMAGES, run_build_py  # noqa: E402
from prebake_testing.runpod_api import schema_available, serve_runpod_api, where_to_put_it  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs_runpod_schema: checks against RunPod's own v2 schema, which is not "
                            "committed (prebake_testing/runpod_api.py says where it is looked for); skipped without it")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked needs_runpod_schema is skipped when the schema is not there, saying where to put it; a schema
    that is there but not the pinned one is an error (schema_available raises), never a skip."""
    if item.get_closest_marker("needs_runpod_schema") and not schema_available():
        pytest.skip(f"RunPod's v2 schema is not here (it is never committed): {where_to_put_it()}")


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
