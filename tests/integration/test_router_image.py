"""The router pod's image, built by `./build.py router build` (self-test included) and run as RunPod runs it, in front
of two real pods on this machine: a session through it, the pods' key, and a pod joining by `reload` from a root
shell in the running container (RunPod's web terminal)."""

from __future__ import annotations

import json

import pytest

from prebake_testing.buildpy import run_build_py
from prebake_testing.net import answers, free_port, request, wait_until
from prebake_testing.pods import KEY as PODS_KEY, Pod

pytestmark = pytest.mark.docker
TAG = "prebake-router:integration"
ROUTER_KEY = "router-key-integration"


def serving(tmp_path, name: str) -> Pod:
    pod = Pod(tmp_path / name, {"VLLM_API_KEY": PODS_KEY})
    for step in range(1, 5):
        pod.go(step)
    pod.wait_phase("serving")
    return pod


def test_the_router_image_builds_self_tests_and_routes(client, test_base, extra_ca, tmp_path):
    done = run_build_py("router", "build", "--base", test_base, "--extra-ca", str(extra_ca), "--tag", TAG)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "self-test: health 200, no key: 401" in done.stdout
    first, second = serving(tmp_path, "a"), serving(tmp_path, "b")
    port = free_port()
    container = client.containers.run(TAG, detach=True, network_mode="host", environment={
        "PREBAKE_PODS": f"http://127.0.0.1:{first.port}", "VLLM_API_KEY": ROUTER_KEY, "PREBAKE_PODS_KEY": PODS_KEY,
        "VL_PORT": str(port)})
    try:
        ask = lambda session: request(port, "POST", "/v1/messages", {  # noqa: E731
            "model": "claude-sonnet-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
            {"authorization": f"Bearer {ROUTER_KEY}", "x-claude-code-session-id": session})
        wait_until(lambda: answers(port), 20, f"the router in the container: {container.logs()}")
        status, head, body = ask("s1")
        assert status == 200 and head["x-prebake-pod"] == f"127.0.0.1:{first.port}", (status, body)
        assert container.exec_run(["id", "-un"]).output.strip() == b"router"
        # a pod joins: the list on the volume, then reload from a root shell; the router keeps running
        pods = f"http://127.0.0.1:{first.port}\nhttp://127.0.0.1:{second.port}\n"
        write = container.exec_run(["sh", "-c", f"printf '{pods}' > /tmp/pods.txt"], user="root")
        assert write.exit_code == 0
        reload = container.exec_run(["python3", "/opt/prebake/router.py", "reload"], user="root",
                                    environment={"PREBAKE_PODS_FILE": "/tmp/pods.txt"})
        assert reload.exit_code == 0, reload.output
        seen = wait_until(lambda: {ask(f"s{n}")[1].get("x-prebake-pod") for n in range(40)} >=
                          {f"127.0.0.1:{first.port}", f"127.0.0.1:{second.port}"}, 20, "both pods in use")
        assert seen
        container.reload()
        assert container.status == "running"
        assert json.loads(request(port, "POST", "/_standin/echo", b"{}", {"x-api-key": ROUTER_KEY})[2])
    finally:
        container.remove(force=True)
        first.stop()
        second.stop()
