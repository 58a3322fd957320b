"""Hostile round 6 (issue 56): what the pod reads from its own volume is untrusted (entrypoint/untrusted.py).

A file the launcher cannot use (a FIFO, a link, one too deep or of another shape) is set aside with one line and the
start goes on as if it were absent: never a traceback at every start (the file survives the restart), never a hang.
"""

from __future__ import annotations

import json
import os
import tarfile
import threading
from pathlib import Path

import pytest

from entrypoint import untrusted
from entrypoint.contract import Observe, read_state
from entrypoint.launcher import hfcache
from entrypoint.launcher.cacherestore import Refused, unpack
from entrypoint.launcher.runstate import write_start
from entrypoint.redact import Redactor
from entrypoint.vllmlog import Follower
from prebake_testing.hfcache import ORNITH, cache_repo, sharded_weights

DEEP = b"[" * 60_000 + b"]" * 60_000
HOSTILE_STATES = {
    "identity a number": json.dumps({"identity": 1, "vllm": "x"}).encode(),
    "60,000 deep": DEEP,
    "a string": b'"state"',
    "not UTF-8": b'{"identity": "\xff"}',
    "an exit of another shape": json.dumps({"vllm": {"exit": [1]}, "started_at": "yesterday"}).encode(),
}


def finishes(work, seconds: float = 10.0, unblock: Path | None = None):
    """work()'s result, or an AssertionError when it blocks for `seconds` (a FIFO opened for reading: `unblock`
    opens its other end afterwards, so that the blocked thread ends)."""
    result: list = []

    def run() -> None:
        try:
            result.append(work())
        except BaseException as err:  # noqa: BLE001 - raised again in the test's thread
            result.append(err)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    blocked = thread.is_alive()
    if blocked and unblock is not None:
        os.close(os.open(unblock, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(5)
    assert not blocked, f"blocked for {seconds} s"
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


@pytest.mark.parametrize("content", HOSTILE_STATES.values(), ids=HOSTILE_STATES.keys())
def test_a_state_file_the_launcher_cannot_use_is_set_aside_not_a_crash(tmp_path, content):
    run_dir = tmp_path / "prebake" / "pod"
    run_dir.mkdir(parents=True)
    (run_dir / "state.json").write_bytes(content)
    observe = Observe(str(run_dir), 90, None)
    write_start(observe, {"variant": "a40"}, [], ["vllm", "serve", "x"], Redactor({}))
    state = read_state(str(run_dir / "state.json"))
    assert state["previous_run"] is None and state["identity"] == {"variant": "a40"}
    assert str(run_dir / "state.json") in [entry["file"] for entry in state["set_aside"]], state["set_aside"]


@pytest.mark.parametrize("make,why", [
    (lambda path: os.mkfifo(path), "a FIFO"),
    (lambda path: os.symlink("/etc/hostname", path), "symbolic link"),
    (lambda path: os.mkdir(path), "a folder"),
    (lambda path: path.write_bytes(b" " * (4 << 20) + b"{}"), "over 4194304 bytes"),
    (lambda path: path.write_bytes(b'{"a": ' * 20 + b"1" + b"}" * 20), "nests 20 levels deep, over 16"),
    (lambda path: path.write_text('{"decisions": [{"topic": 1}]}'), 'decisions[0].topic is a number, not a string'),
    (lambda path: path.write_text('{"decisions": [{"topic": "x", "why": "y"}]}'), "decisions[0] lacks decision"),
])
def test_the_reader_sets_aside_what_is_not_a_plain_bounded_json_file(tmp_path, make, why):
    path = tmp_path / "state.json"
    make(path)
    lines: list[str] = []
    assert finishes(lambda: untrusted.read_json(str(path), "state", lines.append), unblock=path) is None
    assert len(lines) == 1 and why in lines[0] and str(path) in lines[0], lines
    untrusted.read_json(str(path), "state", lines.append)
    assert len(lines) == 1, "said once per file and reason"


def test_a_plain_file_of_the_right_shape_is_read(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"identity": {"variant": "a40"}, "vllm": {"starts": [1.5], "exit": None}}))
    assert untrusted.read_json(str(path), "state") == {"identity": {"variant": "a40"},
                                                       "vllm": {"starts": [1.5], "exit": None}}
    assert untrusted.read_json(str(tmp_path / "absent.json"), "state") is None


def test_a_fifo_as_the_log_never_blocks_its_reader(tmp_path):
    """The bridge follows vllm.log on its event loop: a FIFO in its place must not stop it."""
    log = tmp_path / "vllm.log"
    os.mkfifo(log)
    assert finishes(lambda: list(Follower(str(log)).lines()), unblock=log) == []
    assert any(entry["file"] == str(log) and "FIFO" in entry["why"] for entry in untrusted.set_aside_files())


def test_a_deep_weight_index_in_the_hub_cache(tmp_path):
    cache_repo(tmp_path, ORNITH, sharded_weights(2))
    index = next((tmp_path / ("models--" + ORNITH.replace("/", "--")) / "snapshots").iterdir()) / \
        "model.safetensors.index.json"
    index.resolve().write_bytes(b'{"weight_map": ' + DEEP + b"}")
    check = hfcache.check_repo(ORNITH, str(tmp_path))
    assert not check.complete and "nests 60001 levels deep" in check.detail, check


def test_a_weight_index_linked_outside_its_repository_is_not_read(tmp_path):
    cache_repo(tmp_path, ORNITH, sharded_weights(2))
    index = next((tmp_path / ("models--" + ORNITH.replace("/", "--")) / "snapshots").iterdir()) / \
        "model.safetensors.index.json"
    outside = tmp_path / "elsewhere.json"
    outside.write_text(json.dumps({"weight_map": {}}))
    index.unlink()
    index.symlink_to(outside)
    check = hfcache.check_repo(ORNITH, str(tmp_path))
    assert not check.complete and "links outside" in check.detail, check


def tar_member(name: str, payload: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(payload), 0o644, 1_700_000_000
    return info.tobuf(format=tarfile.USTAR_FORMAT) + payload + b"\0" * (-len(payload) % 512)


@pytest.mark.parametrize("manifest,why", [
    (b"[" * 300_000, "nests 300000 levels deep"),
    (b'{"key": ' + DEEP + b"}", "nests 60001 levels deep"),
    (b'{"key": ["k"]}', 'key is an array, not a string'),
])
def test_an_archive_whose_manifest_is_deep_or_of_another_shape_is_refused_with_that_reason(tmp_path, manifest, why):
    archive = tmp_path / "cache.tar"
    archive.write_bytes(tar_member("prebake-compile-cache.json", manifest) + b"\0" * 1024)
    with pytest.raises(Refused, match="its manifest was set aside") as refused:
        unpack(str(archive), "k" * 64, str(tmp_path / "staging"), 1 << 30, threading.Event(), str(tmp_path / "cache"))
    assert why in str(refused.value)


def test_an_archive_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    archive = tmp_path / "cache.tar.gz"
    os.mkfifo(archive)
    with pytest.raises(untrusted.SetAside, match="FIFO"):
        finishes(lambda: unpack(str(archive), "k" * 64, str(tmp_path / "s"), 1 << 30, threading.Event(), str(tmp_path / "c")),
                 unblock=archive)
