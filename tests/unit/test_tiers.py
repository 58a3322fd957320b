"""The tiers and the parallel run (prebake_testing/tiers.py): every folder of tests has its tier, and under pytest-xdist
each file runs whole on one worker, the Docker tier's folder of builds as one unit, first."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from prebake_testing.leftovers import RUN_MARK
from prebake_testing.tiers import PREBUILT, TIER_OF_FOLDER, start_rank, xdist_unit

ROOT = Path(__file__).resolve().parents[2]


def test_every_folder_of_tests_has_a_tier_or_is_the_fast_one():
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir() and list(p.glob("test_*.py"))}
    assert folders - set(TIER_OF_FOLDER) == {"unit"}, "a new folder of tests: give it a tier in TIER_OF_FOLDER"
    assert set(TIER_OF_FOLDER.values()) == {"docker", "processes"}


def test_the_docker_tiers_builds_are_one_unit_and_every_other_file_its_own():
    assert xdist_unit("tests/integration/test_build.py::test_a") == xdist_unit("tests/integration/test_push.py::t[x]")
    assert xdist_unit("tests/integration/prebuilt/test_vllm_help.py::test_a") == \
        "tests/integration/prebuilt/test_vllm_help.py"  # reads the a40 image only: on either worker
    assert xdist_unit("tests/serving/test_peak.py::test_a[with uvloop]") == "tests/serving/test_peak.py"
    assert xdist_unit("tests/serving/test_peak.py::Class::test_b") == "tests/serving/test_peak.py"
    assert xdist_unit("tests/unit/test_runpod.py::test_local_image_size_reads_the_docker_engine") == \
        "tests/unit/test_runpod.py"  # marked docker, but needs none of tests/integration's session images


def test_two_workers_run_each_file_whole():
    """README's `-n 2`: without prebake_testing/tiers.py's scheduler, xdist would deal test_safetext.py's 16 tests out one
    by one to both workers (and a file's module-scoped servers would start on each)."""
    files = ["tests/unit/test_safetext.py", "tests/unit/test_tags.py", "tests/swap/test_modelstate.py"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "-v", "-p", "no:cacheprovider", *files],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    workers = defaultdict(set)
    for worker, nodeid in re.findall(r"\[(gw\d)\] \[ *\d+%\] PASSED (\S+)", result.stdout):
        workers[nodeid.split("::")[0]].add(worker)
    assert set(workers) == set(files), result.stdout[-3000:]
    assert all(len(ran_on) == 1 for ran_on in workers.values()), workers


def test_the_builds_start_first_then_the_prebuilt_images_readers_then_the_rest():
    ranks = [start_rank(nodeid) for nodeid in ("tests/integration/test_push.py::t", PREBUILT + "test_vllm_help.py::t",
                                               "tests/serving/test_peak.py::t", "tests/unit/test_tags.py::t")]
    assert ranks == [0, 1, 2, 2]


def test_no_file_reading_prebuilt_images_builds_or_uses_the_sessions_images():
    """What makes a file in tests/integration/prebuilt/ safe on either worker: it builds nothing through build.py and
    asks for none of the images the builds' unit makes (test_base, tiny)."""
    files = sorted((ROOT / PREBUILT).glob("test_*.py"))
    assert files
    offending = [f"{path.name}: {word}" for path in files for word in ("run_build_py", "(tiny", " tiny,", "tiny)",
                                                                        "test_base")
                 if word in path.read_text(encoding="utf-8")]
    assert offending == [], "a file that builds or needs the session's images belongs in tests/integration/"


def test_the_units_run_in_the_collections_order_not_the_most_tests_first():
    """xdist's own order puts the unit with the most tests first; the scheduler keeps the collection's (the longest
    work first, which is not the most tests: tests/integration/prebuilt/test_catalogue_cpu.py is one test of 90 s)."""
    files = ["tests/unit/test_tags.py", "tests/unit/test_safetext.py"]  # 6 tests, then 16
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    result = subprocess.run([sys.executable, "-m", "pytest", "-n", "1", "-v", "-p", "no:cacheprovider", *files],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    ran = [nodeid.split("::")[0] for nodeid in re.findall(r"\[gw0\] \[ *\d+%\] PASSED (\S+)", result.stdout)]
    assert list(dict.fromkeys(ran)) == files, result.stdout[-3000:]
