"""A pytest plugin (tests/conftest.py loads it): the test tiers, and how pytest-xdist shares the tests out.

A test's folder under tests/ gives its tier (README's developer section and docs/testing.md give each tier's
command): `docker` (a real Docker Engine) or `processes` (the pod's programs as real processes); tests/unit is the
fast tier, but for a test marked `docker` there. Under pytest-xdist's default distribution (README's `-n 2`) each
test file runs whole on one worker, so its module-scoped servers start once, and the Docker tier's folder is one unit
on one worker, in order: its tests share the session's images and one engine, and two workers would build the same
tags at once.
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


def xdist_unit(nodeid: str) -> str:
    """What runs whole on one worker: the Docker tier's folder, or the test's file."""
    folder = folder_of(nodeid)
    return f"tests/{folder}/" if TIER_OF_FOLDER.get(folder) == "docker" else nodeid.split("::", 1)[0]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "processes: runs the pod's programs as real processes (the tests/ folders of "
                            f"prebake_testing/tiers.py); the fast tier is -m '{FAST}'")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = TIER_OF_FOLDER.get(folder_of(item.nodeid))
        if tier and not item.get_closest_marker(tier):
            item.add_marker(tier)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: no error where it is not installed (-p no:xdist)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    # (xdist's own --dist loadgroup cannot do it under pytest 9: it renames item._nodeid, which pytest 9 ignores)
    if config.getvalue("dist") != "load":
        return None  # a distribution asked for by name (--dist loadfile, ...) is xdist's own
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

    return TierScheduling(config, log)
