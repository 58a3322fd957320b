"""vLLM's compile cache shared across pods (VL_CACHE_REPO), through the real launcher and bridge, the stand-in vLLM
that plays vLLM's AOT compile cache (phased_vllm.py) and a stand-in Hub that the real huggingface_hub client talks
to (prebake_testing/hub.py): the first pod compiles and publishes once it serves, a new pod restores and loads it;
every broken or hostile archive, a missing repository and an unreachable Hub give a cold start and one line."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from prebake_testing.hosts import Launcher
from prebake_testing.hub import Hub
from prebake_testing.net import free_port, wait_until
from prebake_testing.pods import KEY, Pod

TOKEN = "hf_PlantedCompileCacheToken0123456789"
REPO = "me/compile-cache"


@pytest.fixture
def hub():
    server = Hub()
    server.create(REPO)
    yield server
    server.stop()


def cache_env(hub: Hub, **more: str) -> dict:
    return {"VLLM_API_KEY": KEY, "VL_CACHE_REPO": REPO, "HF_TOKEN": TOKEN, "HF_ENDPOINT": hub.url, **more}


def planned(folder: Path, env: dict) -> dict:
    """The launcher's own compile-cache plan for a Pod of this folder and environment (its dry run)."""
    folder.mkdir(exist_ok=True)
    return Launcher(folder).plan("h200_580", env={**env, "VL_CACHE_ROOT": str(folder / "volume")}).plan["compile_cache"]


def serve(pod: Pod) -> None:
    for step in range(1, 5):
        pod.go(step)
    pod.wait_phase("serving")


def members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: tar.extractfile(m).read() if m.isfile() else b"" for m in tar}


def test_the_first_pod_publishes_and_a_new_pod_restores(tmp_path, hub):
    first = tmp_path / "first"
    plan = planned(first, cache_env(hub))
    pod = Pod(first, cache_env(hub))
    try:
        serve(pod)
        assert (pod.control / "compile-miss").exists()  # nothing to restore: vLLM compiled
        archive = wait_until(lambda: hub.get(REPO, plan["path_in_repo"]), 20, "the archive published")
        status = wait_until(lambda: (pod.status()[1].get("compile_cache") or {}).get("publish", {}).get("state")
                            == "published" and pod.status()[1], 10, "the status page saying published")
        assert status["compile_cache"]["restore"]["state"] == "cold"
        assert "not in the repository yet" in status["compile_cache"]["restore"]["why"]
        text = pod.status(path="/prebake/status.txt")[1].decode()
        assert "compile cache (datasets/me/compile-cache:compile-cache/vllm-0.27.1/NVIDIA_H200/" in text
        assert TOKEN not in json.dumps(status) and TOKEN not in text
    finally:
        _, _, first_err = pod.stop()
    assert hub.commits[0]["authorization"] == f"Bearer {TOKEN}"
    files = members(archive)
    manifest = json.loads(files.pop("prebake-compile-cache.json"))
    assert manifest["key"] == plan["key"] and manifest["facts"]["gpus"] == ["NVIDIA H200"]
    assert files and all(name.startswith(("torch_compile_cache/torch_aot_compile/",
                                          "torch_compile_cache/flashinfer_autotune/",
                                          "torch_compile_cache/triton/")) for name in files)
    assert any(name.endswith("/rank_0_0/model") for name in files)
    assert any(name.endswith("/autotune_configs.json") for name in files)  # FlashInfer's autotuner, read back
    # Triton's kernels: what loads one (its index, metadata, cubin) and autotune results; no IR, launcher or tmp.*
    kernel = Path((pod.control / "triton-miss").read_text()).name
    triton = sorted(name.split("/", 2)[2] for name in files if name.startswith("torch_compile_cache/triton/"))
    assert [name for name in triton if name.startswith(kernel)] == [
        f"{kernel}/__grp__triton_poi_fused_add_0.json", f"{kernel}/triton_poi_fused_add_0.cubin",
        f"{kernel}/triton_poi_fused_add_0.json"]
    assert [name.split("/")[1] for name in triton if not name.startswith(kernel)] == ["_topk_topp_kernel.autotune.json"]
    assert " 2 Triton kernel folders, " in first_err  # the kernel's and its autotune result's
    assert all(TOKEN.encode() not in data for data in [archive, gzip.decompress(archive)])
    assert "compile-cache: cold start: " in first_err and "compile-cache: published " in first_err
    assert TOKEN not in first_err

    second = tmp_path / "second"  # a new pod: another volume, empty
    second.mkdir()
    pod = Pod(second, cache_env(hub))
    try:
        serve(pod)
        assert (pod.control / "compile-hit").exists(), "vLLM did not find the restored cache"
        assert (pod.control / "autotune-hit").exists(), "vLLM did not find the restored FlashInfer autotune results"
        # another volume path than the first pod's: the kernel's index names the files where they landed
        assert (pod.control / "triton-hit").exists() and not (pod.control / "triton-miss").exists()
        status = pod.status()[1]
        assert status["compile_cache"]["restore"]["state"] == "restored"
        assert status["compile_cache"]["publish"]["state"] == "not published"
        restored = [d for d in status["decisions"] if d["topic"] == "compile-cache"][-1]
        assert restored["decision"].startswith("restored datasets/me/compile-cache:")
    finally:
        _, _, err = pod.stop()
    assert len(hub.commits) == 1  # the repository had it: never published twice
    assert "compile-cache: restored " in err and TOKEN not in err
    assert "Cubin file saved by TritonBundler not found" not in err and ", 2 Triton kernel folders" in err


def test_an_archive_made_before_triton_was_carried_still_restores(tmp_path, hub):
    first = tmp_path / "first"  # TRITON_CACHE_DIR outside torch_compile_cache/, where earlier launchers put it
    env = cache_env(hub, TRITON_CACHE_DIR=str(tmp_path / "elsewhere" / "triton"))
    plan = Launcher(tmp_path).plan("h200_580", env={**env, "VL_CACHE_ROOT": str(first / "volume")})
    assert "without Triton's kernels (TRITON_CACHE_DIR is " in plan.decision("compile-cache")[0]["decision"]
    path = plan.plan["compile_cache"]["path_in_repo"]  # the second pod's too: TRITON_CACHE_DIR is no vLLM option
    first.mkdir()
    pod = Pod(first, env)
    try:
        serve(pod)
        archive = wait_until(lambda: hub.get(REPO, path), 20, "the archive published")
    finally:
        pod.stop()
    assert not [name for name in members(archive) if "/triton/" in name]

    second = tmp_path / "second"
    second.mkdir()
    pod = Pod(second, cache_env(hub))
    try:
        serve(pod)
        assert (pod.control / "compile-hit").exists() and (pod.control / "triton-miss").exists()
        assert pod.status()[1]["compile_cache"]["restore"]["state"] == "restored"
    finally:
        _, _, err = pod.stop()
    assert ", 0 Triton kernel folders" in err and "Cubin file saved by TritonBundler not found" in err  # as before


def outcome_lines(err: str) -> list[str]:
    """The restore's lines (the plan's own decision line says what will be tried, before)."""
    return [line for line in err.splitlines() if "compile-cache: cold start: " in line or "compile-cache: restored " in line]


def tar_gz(entries: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for info, data in entries:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return gzip.compress(raw.getvalue())


def entry(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    return info, data if kind == tarfile.REGTYPE else None


def manifest(key: str) -> tuple:
    return entry("prebake-compile-cache.json", json.dumps({"key": key}).encode())


def good(key: str) -> bytes:
    return tar_gz([manifest(key), entry("torch_compile_cache/torch_aot_compile/abc/rank_0_0/model", b"m" * 5000)])


def size_bomb(key: str) -> bytes:
    """A member that declares 40 GiB: refused from its header, before any of it is unpacked."""
    info, data = manifest(key)
    blocks = info.tobuf(format=tarfile.GNU_FORMAT) + data + b"\0" * (-len(data) % 512)
    huge = tarfile.TarInfo("torch_compile_cache/abc/rank_0_0/huge.bin")
    huge.size = 40 << 30
    return gzip.compress(blocks + huge.tobuf(format=tarfile.GNU_FORMAT) + b"\0" * 65536)


HOSTILE = {
    "traversal": (lambda key: tar_gz([manifest(key), entry("torch_compile_cache/../../../../evil.txt")]),
                  "leaves the cache folder"),
    "absolute": (lambda key: tar_gz([manifest(key), entry("/tmp/prebake-evil-absolute.txt")]),
                 "leaves the cache folder"),
    "symlink": (lambda key: tar_gz([manifest(key), entry("torch_compile_cache/link", kind=tarfile.SYMTYPE,
                                                         link="/etc/passwd")]), "holds a link"),
    "hardlink": (lambda key: tar_gz([manifest(key), entry("torch_compile_cache/hard", kind=tarfile.LNKTYPE,
                                                          link="/etc/passwd")]), "holds a link"),
    "device": (lambda key: tar_gz([manifest(key), entry("torch_compile_cache/dev", kind=tarfile.CHRTYPE)]),
               "special file"),
    "outside the cache": (lambda key: tar_gz([manifest(key), entry("bin/evil")]), "outside torch_compile_cache/"),
    "size bomb": (size_bomb, "size bomb"),
    "foreign": (lambda key: good("f" * 64), "another pod's cache"),
    "no manifest": (lambda key: tar_gz([entry("torch_compile_cache/abc/x")]), "not a prebake compile cache"),
    "truncated": (lambda key: good(key)[:60], "corrupt or truncated"),
    "corrupt": (lambda key: b"\x1f\x8b" + os.urandom(4000), "corrupt or truncated"),
    "not gzip": (lambda key: b"<html>proxy login page</html>", "corrupt or truncated"),
}


def restore_outcome(pod: Pod) -> dict | None:
    """The status page once it shows the restore's outcome (not "restoring")."""
    code, status = pod.status()
    restore = ((status or {}).get("compile_cache") or {}).get("restore") or {}
    return status if code == 200 and restore.get("state") not in (None, "restoring") else None


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_bad_archive_is_a_cold_start_with_one_line(tmp_path, hub, case):
    env = cache_env(hub)
    plan = planned(tmp_path, env)
    make, why = HOSTILE[case]
    hub.put(REPO, plan["path_in_repo"], make(plan["key"]))
    pod = Pod(tmp_path, env)
    try:
        pod.wait_phase("starting", timeout=10)
        # the page shows "starting" from the bridge's start, while the launcher still restores: wait for its outcome
        status = wait_until(lambda: restore_outcome(pod), 10, "the restore's outcome on the status page", pod.process)
        assert status["compile_cache"]["restore"]["state"] == "cold"
        # the repository has an archive under this key, bad as it is: no publish over it
        assert status["compile_cache"]["publish"]["state"] == "not published"
    finally:
        _, _, err = pod.stop()
    lines = outcome_lines(err)
    assert len(lines) == 1 and "cold start: " in lines[0] and "the archive was refused: " in lines[0], lines
    assert why in lines[0], lines
    assert "Traceback" not in err and "start " in err  # vLLM started all the same
    cache = pod.volume / "vllm" / "torch_compile_cache"
    assert not cache.exists() or not any(cache.rglob("*")), list(cache.rglob("*"))
    assert not (tmp_path / "evil.txt").exists() and not Path("/tmp/prebake-evil-absolute.txt").exists()
    assert not list((pod.volume / "vllm").glob(".prebake-*"))  # no staging or download left behind


@pytest.mark.parametrize("case", ["no repository", "no network", "no token"])
def test_no_repository_no_network_no_token(tmp_path, hub, case):
    env = cache_env(hub)
    if case == "no repository":
        env["VL_CACHE_REPO"] = "me/never-created"
    elif case == "no network":
        env["HF_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    else:
        del env["HF_TOKEN"]
    pod = Pod(tmp_path, env)
    try:
        serve(pod)
        status = pod.status()[1]
    finally:
        _, _, err = pod.stop()
    [line] = outcome_lines(err)
    expected = {"no repository": "the repository does not exist", "no network": "the Hub could not be reached",
                "no token": "not in the repository yet; not published (HF_TOKEN unset)"}[case]
    assert "cold start: " in line and expected in line, line
    assert status["compile_cache"]["restore"]["state"] == "cold" and not hub.commits


def test_the_dry_run_shows_the_decision_and_the_key(tmp_path):
    launcher = Launcher(tmp_path)
    off = launcher.plan("h200_580")
    assert off.decision("compile-cache")[0]["decision"].startswith("off: ") and "compile_cache" not in off.plan
    env = {"VL_CACHE_REPO": REPO, "HF_TOKEN": TOKEN}
    plan = launcher.plan("h200_580", env=env)
    [decision] = plan.decision("compile-cache")
    assert decision["decision"].startswith("restore datasets/me/compile-cache:compile-cache/vllm-0.27.1/NVIDIA_H200/")
    assert "published once vLLM first serves" in decision["decision"] and TOKEN not in plan.stdout
    # no volume: the caches stay where their libraries put them, and Triton's outside the archive
    assert ", without Triton's kernels (TRITON_CACHE_DIR is unset, not " in decision["decision"]
    on_volume = launcher.plan("h200_580", env={**env, "VL_CACHE_ROOT": str(tmp_path / "volume")})
    assert ", with Triton's kernels (TRITON_CACHE_DIR inside it);" in on_volume.decision("compile-cache")[0]["decision"]
    key = plan.plan["compile_cache"]["key"]
    # what changes vLLM's compiled code changes the key; where vLLM listens and what it is called do not
    assert launcher.plan("h200_580", env={**env, "VL_PORT": "8090", "VL_ALIASES": "none",
                                          "VL_INTERNAL_PORT": "18099"}).plan["compile_cache"]["key"] == key
    # how vLLM starts its processes compiles nothing differently (vLLM's compile_factors ignore it too)
    assert launcher.plan("h200_580", env={**env, "VLLM_WORKER_MULTIPROC_METHOD": "spawn"}
                         ).plan["compile_cache"]["key"] == key
    for changed in ({"VL_BATCHED": "4096"}, {"VL_CTX": "131072"}, {"VL_KV": "fp8"}):
        assert launcher.plan("h200_580", env={**env, **changed}).plan["compile_cache"]["key"] != key, changed
    assert launcher.plan("a40x1_580", env=env).plan["compile_cache"]["key"] != key  # another GPU
    models = launcher.plan("h200_580", env={**env, "VL_CACHE_REPO": "models/me/cc"}).plan["compile_cache"]
    assert models["repo_type"] == "model" and models["repo_id"] == "me/cc"
    restore_only = launcher.plan("h200_580", env={"VL_CACHE_REPO": REPO}).decision("compile-cache")[0]
    assert "not published (HF_TOKEN unset: restore only)" in restore_only["decision"]
    bad = launcher.run("h200_580", env={"VL_CACHE_REPO": "not a repo"})
    assert bad.rc != 0 and "VL_CACHE_REPO" in bad.stderr


def test_the_bridge_answers_and_holds_requests_while_the_cache_is_restored(tmp_path, hub):
    import threading

    from prebake_testing.net import get, request

    hub.hang.set()  # the Hub does not answer yet: the restore waits
    pod = Pod(tmp_path, cache_env(hub))  # returns once the bridge listens: before the restore ends
    answers: dict = {}
    try:
        status = pod.wait_phase("starting", timeout=10)
        assert status["compile_cache"]["restore"]["state"] == "restoring"
        thread = threading.Thread(target=lambda: answers.update(chat=request(
            pod.port, "POST", "/v1/chat/completions", {"model": "ornith"}, {"authorization": f"Bearer {KEY}"},
            timeout=60)))
        thread.start()
        wait_until(lambda: pod.status()[1]["held_for_start"] == 1, 10, "the request held during the restore")
        assert get(pod.port, "/health", {"authorization": f"Bearer {KEY}"})[0] == 503
        assert not (pod.control / "compile-miss").exists()  # vLLM has not started
        hub.hang.clear()
        serve(pod)
        thread.join(30)
        assert answers["chat"][0] == 200 and (pod.control / "compile-miss").exists()
    finally:
        hub.hang.clear()
        pod.stop()


def test_a_stop_during_the_restore_ends_the_pod_at_once(tmp_path, hub):
    import signal
    import time

    hub.hang.set()
    pod = Pod(tmp_path, cache_env(hub))
    try:
        assert pod.wait_phase("starting", timeout=10)["compile_cache"]["restore"]["state"] == "restoring"
        began = time.monotonic()
        pod.process.send_signal(signal.SIGTERM)
        code, _, err = pod.finish(timeout=20)
    finally:
        hub.hang.clear()
        pod.stop()
    assert code == 143 and time.monotonic() - began < 10, err[-2000:]
    assert "cold start: " in err and "the pod is stopping" in err and "start vllm" not in err.lower().split("compile-cache: cold")[-1]


def test_without_the_bridge_the_cache_is_restored_before_the_exec_and_published_after(tmp_path, hub):
    control = tmp_path / "control-off"
    control.mkdir()
    for step in range(1, 5):
        (control / f"go-{step}").touch()  # no status page to wait on: vLLM starts straight through
    env = cache_env(hub, VL_BRIDGE="off", PHASED_CONTROL=str(control))
    plan = planned(tmp_path, env)
    pod = Pod(tmp_path, env)  # returns once vLLM itself listens on the exposed port
    try:
        archive = wait_until(lambda: hub.get(REPO, plan["path_in_repo"]), 20, "the archive published")
        assert (control / "compile-miss").exists() and json.loads(members(archive)["prebake-compile-cache.json"])["key"] == plan["key"]
    finally:
        _, _, err = pod.stop()
    assert "compile-cache: cold start: " in err and "compile-cache: published " in err and TOKEN not in err


def test_a_secret_in_vllms_environment_is_keyed_but_never_shown(tmp_path):
    launcher = Launcher(tmp_path)
    secret = "planted-vllm-secret-0123456789"
    env = {"VL_CACHE_REPO": REPO, "VLLM_SOME_TOKEN": secret}
    plan = launcher.plan("h200_580", env=env)
    assert secret not in plan.stdout and plan.plan["compile_cache"]["facts"]["env"]["VLLM_SOME_TOKEN"] != secret
    other = launcher.plan("h200_580", env={**env, "VLLM_SOME_TOKEN": secret[::-1]})
    assert other.plan["compile_cache"]["key"] != plan.plan["compile_cache"]["key"]  # keyed on the value itself


def test_the_publisher_counts_an_exited_launcher_as_gone_before_it_is_reaped():
    """The publisher stops waiting for vLLM once the launcher is gone; a launcher that exited but that its parent
    has not reaped yet (a zombie) is gone too (a test's harness reaps it only once the pipes the publisher holds
    close: the publisher waited 20 s, until the harness gave up)."""
    import subprocess
    import sys

    from entrypoint.launcher.cachepublish import alive

    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert alive(process.pid)
        process.stdin.close()  # it exits; not reaped until wait()
        wait_until(lambda: not alive(process.pid), 10, "the exited child counted as gone")
    finally:
        process.kill()
        process.wait()
    assert not alive(process.pid) and alive(None)
