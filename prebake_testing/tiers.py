"""A pytest plugin (tests/conftest.py loads it): the test tiers, and how pytest-xdist shares the tests out.

A test's folder under tests/ gives its tier (README's developer section and docs/testing.md give each tier's
command): `docker` (a real Docker Engine) or `processes` (the pod's programs as real processes); tests/unit is the
fast tier, but for a test marked `docker` there. Under pytest-xdist's default distribution (README's `-n 3`) each
test file runs whole on one worker, so its module-scoped servers start once. The Docker tier's files that build
(tests/integration/) are one unit on one worker, in order: they share the session's images (the test base, the tiny
variant) and two workers would build the same tags at once. Its files that only read images built before the run
(tests/integration/prebuilt/: the a40 and ada images) are a unit each, on any worker. The builds' unit goes first,
then those files, then the rest: the longest work starts first, so that no worker is left alone at the end.
"""

from __future__ import annotations

import pytest

TIER_OF_FOLDER = {
    "integration": "docker",  # images built through build.py, containers, local registries
    "launcher": "processes",  # the launcher, the bridge, stand-in vLLMs, nginx as RunPod's proxy, as real processes
    "serving": "processes",
    "swap": "processes",
    "router": "processes",
}
FAST = "not docker and not processes"  # the fast tier's -m expression


def folder_of(nodeid: str) -> str:
    """The folder under tests/ of a node id (tests/serving/test_x.py::test_y: serving), or ""."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else ""


PREBUILT = "tests/integration/prebuilt/"  # Docker tests that only read images built before the run


def xdist_unit(nodeid: str) -> str:
    """What runs whole on one worker: the Docker tier's folder of builds, or the test's file."""
    folder, path = folder_of(nodeid), nodeid.split("::", 1)[0]
    return f"tests/{folder}/" if TIER_OF_FOLDER.get(folder) == "docker" and not path.startswith(PREBUILT) else path


def start_rank(nodeid: str) -> int:
    """0: the Docker tier's unit of builds (the run's longest), 1: the files reading prebuilt images, 2: the rest."""
    unit = xdist_unit(nodeid)
    return 0 if unit.endswith("/") else 1 if unit.startswith(PREBUILT) else 2


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "processes: runs the pod's programs as real processes (the tests/ folders of "
                            f"prebake_testing/tiers.py); the fast tier is -m '{FAST}'")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = TIER_OF_FOLDER.get(folder_of(item.nodeid))
        if tier and not item.get_closest_marker(tier):
            item.add_marker(tier)
    items.sort(key=lambda item: start_rank(item.nodeid))  # stable: each file's tests stay in their order


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: no error where it is not installed (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # (xdist's own --dist loadgroup cannot do it under pytest 9: it renames item._nodeid, which pytest 9 ignores)
    if config.getvalue("dist") != "load":
        return None  # a distribution asked for by name (--dist loadfile, ...) is xdist's own
    from xdist.scheduler import LoadScopeScheduling

    # the units in the collection's order (pytest_collection_modifyitems: the longest work first), not xdist's default
    # of the most tests first, which left the one-test files reading prebuilt images (the longest) for the end
    config.option.loadscopereorder = False

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    return TierScheduling(config, log)
