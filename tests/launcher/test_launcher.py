"""The launcher with the bridge: the plan (--dry-run), the port checks, and the process model with a
stand-in `vllm` on PATH: vLLM's exit code is the container's, a dead bridge stops vLLM, signals reach it."""

from __future__ import annotations

import json
import os
import signal
import socket
import time

import pytest

from prebake_testing.net import free_port, request, wait_for_port, wait_healthy
from prebake_testing.pods import Run


def test_dry_run_shows_the_bridge_and_both_ports(launcher):
    plan = launcher.plan("h200_580")
    assert plan.plan["bridge"] == {"mode": "keepalive", "port": 8080, "vllm_host": "127.0.0.1", "vllm_port": 18081,
                                   "heartbeat_s": 15.0, "start_hold_s": 600.0}
    assert plan.option("--host") == ["127.0.0.1"] and plan.option("--port") == ["18081"]
    [decision] = plan.decision("bridge")
    assert decision["decision"] == ("keepalive: port 8080 (VL_PORT) relays to vLLM on 127.0.0.1:18081 "
                                    "(VL_INTERNAL_PORT), heartbeat after 15 s of silence; a generation request "
                                    "that arrives while vLLM starts is held up to 10 min (VL_START_HOLD) and "
                                    "answered once vLLM serves")
    assert "100 s" in decision["why"]


def test_bridge_off_lets_vllm_bind_the_exposed_port(launcher):
    plan = launcher.plan("h200_580", env={"VL_BRIDGE": "off", "VL_PORT": "8000"})
    assert plan.option("--host") == ["0.0.0.0"] and plan.option("--port") == ["8000"]
    assert plan.plan["bridge"]["mode"] == "off" and plan.decision("bridge")[0]["decision"].startswith("off")


def test_the_scripts_names_are_accepted(launcher):
    assert launcher.plan("h200_580", env={"VL_BRIDGE": "on"}).plan["bridge"]["mode"] == "keepalive"
    proxy = launcher.plan("h200_580", env={"VL_PROXY_PORT": "8088"})
    assert proxy.plan["bridge"]["port"] == 8088 and "(VL_PROXY_PORT)" in proxy.decision("bridge")[0]["decision"]
    both = launcher.plan("h200_580", env={"VL_PROXY_PORT": "8088", "VL_PORT": "8090"})
    assert both.plan["bridge"]["port"] == 8090  # VL_PORT wins
    off = launcher.plan("h200_580", env={"VL_PROXY_PORT": "8088", "VL_BRIDGE": "off"})
    assert off.option("--port") == ["8088"]


def test_container_port_argument_moves_vllm_not_the_bridge(launcher):
    plan = launcher.plan("h200_580", args=["--port", "9000"])
    assert plan.plan["bridge"]["port"] == 8080 and plan.plan["bridge"]["vllm_port"] == 9000
    assert plan.option("--port") == ["9000"]


@pytest.mark.parametrize("env, args, needle", [
    ({"VL_INTERNAL_PORT": "8080"}, [], "is also the keep-alive bridge's port"),
    ({}, ["--port=8080"], "the container's --port"),
    ({"VL_INTERNAL_PORT": "8081"}, [], "VL_INTERNAL_PORT='8081'"),  # RunPod's nginx holds it
    ({"VL_PROXY_PORT": "9091"}, [], "VL_PROXY_PORT='9091'"),
    ({"VL_BRIDGE": "maybe"}, [], "keepalive|off"),
    ({"VL_HEARTBEAT": "0"}, [], "VL_HEARTBEAT='0'"),
    ({}, ["--port", "99999"], "--port '99999' is not a port"),
    ({}, ["--port", "²"], "--port '²' is not a port"),  # "²".isdigit() is True; int("²") raised
    ({}, ["--port", "８０８１"], "is not a port"),  # fullwidth digits: int() reads them
])
def test_bad_bridge_settings_stop_with_a_clear_error(launcher, env, args, needle):
    result = launcher.run("h200_580", env=env, args=args)
    assert result.rc == 2 and needle in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("which", ["VL_PORT", "VL_INTERNAL_PORT"])
def test_both_ports_are_checked_free_before_anything_starts(launcher, tmp_path, which):
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        other = free_port()
        env = {"VL_PORT": str(port if which == "VL_PORT" else other),
               "VL_INTERNAL_PORT": str(port if which == "VL_INTERNAL_PORT" else other)}
        result = launcher.run("h200_580", env=env, dry_run=False)
    assert result.rc == 3 and f"port {port} ({which}" in result.stderr and "already in use" in result.stderr


def test_requests_reach_vllm_through_the_bridge(launcher, tmp_path):
    run = Run(launcher, tmp_path, "serve")
    try:
        wait_for_port(run.port, run.process, "the bridge")
        # Until the stand-in listens, "model loading"; then the stand-in's answers.
        wait_healthy(run.port, run.process)
        status, _, raw = request(run.port, "POST", "/v1/chat/completions",
                                 {"model": "ornith", "stream": True}, {"x-standin-delay": "1.2"})
        assert status == 200 and raw.startswith(b": keep-alive\n\n: keep-alive\n\n") and raw.endswith(b"[DONE]\n\n")
        assert run.lines()[0].startswith("started serve ") and f"--port {run.internal}" in run.lines()[0]
        run.process.send_signal(signal.SIGTERM)
        code, err = run.finish()
        # uvicorn re-raises the SIGTERM it handled, so the stand-in dies of it: 128 + 15, as a shell says
        assert code == 143, err
        assert "vLLM exited with signal SIGTERM" in err
    finally:
        run.stop()


def test_a_launched_pod_answers_claude_codes_own_model_names(launcher, tmp_path):
    """The launcher hands the bridge vLLM's served names: Claude Code's default name reaches the model; a name
    neither the pod's nor Claude's gets vLLM's 404 (the stand-in checks names as vLLM does)."""
    run = Run(launcher, tmp_path, "serve", env={"STANDIN_STRICT_NAMES": "1"})
    try:
        wait_for_port(run.port, run.process, "the bridge")
        wait_healthy(run.port, run.process)
        body = {"model": "claude-opus-4-8", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        status, _, raw = request(run.port, "POST", "/v1/messages", body)
        assert status == 200 and json.loads(raw)["model"] == "ornith", raw
        status, _, raw = request(run.port, "POST", "/v1/messages", dict(body, model="gpt-4o"))
        assert status == 404, raw
    finally:
        run.stop()


def test_the_container_exits_with_vllms_code(launcher, tmp_path):
    run = Run(launcher, tmp_path, "exit7")
    code, err = run.finish()
    assert code == 7 and "vLLM exited with code 7; stopping the keep-alive bridge" in err
    with pytest.raises(OSError):  # the bridge is gone too
        socket.create_connection(("127.0.0.1", run.port), timeout=1).close()


def test_a_dead_bridge_stops_vllm_and_the_container(launcher, tmp_path):
    run = Run(launcher, tmp_path, "wait")
    wait_for_port(run.port, run.process, "the bridge")
    os.kill(run.bridge_pid(), signal.SIGKILL)
    code, err = run.finish()
    assert code == 5 and "the keep-alive bridge on port" in err and "exited with signal SIGKILL" in err
    assert "SIGTERM" in run.lines()  # vLLM was asked to stop, not orphaned


def test_signals_reach_vllm_and_stop_both(launcher, tmp_path):
    run = Run(launcher, tmp_path, "wait")
    wait_for_port(run.port, run.process, "the bridge")
    run.wait_for(lambda: run.lines(), "vllm did not start")
    run.process.send_signal(signal.SIGUSR1)
    run.wait_for(lambda: "SIGUSR1" in run.lines(), "SIGUSR1 did not reach vLLM")
    assert run.process.poll() is None  # SIGUSR1 stops nothing
    began = time.monotonic()
    run.process.send_signal(signal.SIGTERM)
    code, err = run.finish()
    assert code == 0 and time.monotonic() - began < 5
    assert run.lines().count("SIGTERM") == 1  # once, from the launcher
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", run.port), timeout=1).close()


KEY = "sk-launcher-7c1d-secret"


def test_a_key_given_as_container_argument_goes_to_the_bridge_and_is_never_printed(launcher, tmp_path):
    plan = launcher.plan("h200_580", args=["--api-key", KEY])
    assert KEY not in plan.stdout and plan.option("--api-key") == ["[redacted]"]
    run = Run(launcher, tmp_path, "serve")  # no key: the log says the endpoint is open
    try:
        wait_for_port(run.port, run.process, "the bridge")
    finally:
        run.process.send_signal(signal.SIGTERM)
        _, err = run.finish()
    assert "the endpoint is open to anyone with its URL" in err
    keyed = Run(launcher, tmp_path, "serve", args=["--api-key", KEY])
    try:
        wait_for_port(keyed.port, keyed.process, "the bridge")
        wait_healthy(keyed.port, keyed.process)
        assert request(keyed.port, "GET", "/v1/models")[0] == 401
        assert request(keyed.port, "GET", "/v1/models", headers={"x-api-key": KEY})[0] == 200
        # vLLM behind the bridge has no key of its own: it would refuse the x-api-key the bridge let in
        assert "--api-key" not in keyed.lines()[0] and KEY not in keyed.lines()[0]
    finally:
        keyed.process.send_signal(signal.SIGTERM)
        _, err = keyed.finish()
    assert KEY not in err and "an API key is required" in err and "open to anyone" not in err


@pytest.mark.parametrize("args, needle", [
    (["--api-key"], "--api-key has no value"),
    (["--api-key", "--max-num-seqs", "4"], "--api-key has no value"),
    (["--api-key", "a", "b"], "names 2 keys"),
])
def test_unusable_key_arguments_stop_the_launcher(launcher, args, needle):
    result = launcher.run("h200_580", args=args)
    assert result.rc == 2 and needle in result.stderr


@pytest.mark.parametrize("env, args, needle", [
    ({"VLLM_API_KEY": "   "}, [], "VLLM_API_KEY is only whitespace"),
    ({"VLLM_API_KEY": "\n"}, [], "VLLM_API_KEY is only whitespace"),
    ({}, ["--api-key", " "], "container argument --api-key is only whitespace"),
    ({"VLLM_API_KEY": "abc\n123"}, [], "control character"),
])
def test_a_key_no_client_could_send_stops_the_launcher_with_one_line(launcher, env, args, needle):
    result = launcher.run("h200_580", env=env, args=args)
    assert result.rc == 2 and needle in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_key_pasted_with_its_line_break_or_spaces_still_lets_its_holders_in(launcher, tmp_path):
    # Before: accepted at start, then every client got 401 (the client's key is stripped, the pod's was not).
    run = Run(launcher, tmp_path, "serve", env={"VLLM_API_KEY": f"  {KEY}\n"})
    try:
        wait_for_port(run.port, run.process, "the bridge")
        wait_healthy(run.port, run.process)
        assert request(run.port, "GET", "/v1/models", headers={"authorization": f"Bearer {KEY}"})[0] == 200
        assert request(run.port, "GET", "/prebake/status", headers={"x-api-key": KEY})[0] == 200
        assert request(run.port, "GET", "/v1/models")[0] == 401
    finally:
        run.process.send_signal(signal.SIGTERM)
        _, err = run.finish()
    assert KEY not in err


def test_a_dry_run_shows_no_secret_option_value_nor_url_password(launcher):
    plan = launcher.plan("h200_580", env={"VL_JOURNAL": "on", "VL_JOURNAL_REPO": "owner/journal",
                                          "HF_TOKEN": "hf_" + "x" * 30, "HF_ENDPOINT": "http://user:pa55word@hub.example"},
                         args=["--hf-token", "ContainerArgTok000"])
    assert "ContainerArgTok000" not in plan.stdout and "pa55word" not in plan.stdout
    assert plan.option("--hf-token") == ["[redacted]"]
    assert plan.decision("journal")[0]["decision"].startswith("http://[redacted]@hub.example/")


def test_a_swap_sets_plans_hide_the_key_too(launcher):
    plan = launcher.plan("rtxpro6000_580", env={"VL_MODEL": "ornithnvfp4", "VL_SWAP": "ornith:ornithnvfp4,qwen38:qwen38nvfp4"},
                         args=["--api-key", KEY])
    assert KEY not in plan.stdout
    assert all(model["argv"][model["argv"].index("--api-key") + 1] == "[redacted]" for model in plan.plan["swap"]["models"])


def test_keyless_plans_carry_no_key_for_any_model_of_the_set():
    from entrypoint.launcher.decide import Plan
    from entrypoint.launcher.main import Launch
    from entrypoint.launcher.swap.plan import PlannedModel, SwapSet

    def plan(*argv: str) -> Plan:
        return Plan(argv=("vllm", "serve", "x", *argv), env_changes={}, decisions=())

    other = PlannedModel("b", "b", plan("--api-key", KEY, "--max-num-seqs", "4"))
    first = plan("--api-key=" + KEY)
    swap = SwapSet((PlannedModel("a", "a", first), other), "nvidia-smi", 1.0, 1.0, 1.0)
    stripped = Launch(first, swap).keyless()
    assert KEY not in repr(stripped)
    assert stripped.swap.models[1].plan.argv[-2:] == ("--max-num-seqs", "4")


def test_with_the_bridge_off_vllm_gets_the_key_and_the_log_hides_it(launcher, tmp_path):
    run = Run(launcher, tmp_path, "exit0", env={"VL_BRIDGE": "off"}, args=["--api_key", KEY])
    code, err = run.finish()
    assert code == 0 and KEY not in err and "--api_key [redacted]" in err
    assert "vLLM itself requires the API key on /v1 paths" in err
    assert run.lines()[0].endswith(f"--api_key {KEY}")  # vLLM checks it itself


@pytest.mark.parametrize("argv, keys, kept", [
    (["--api-key", "k1", "--max-num-seqs", "4"], ["k1"], ["--max-num-seqs", "4"]),
    (["--api-key=k1"], ["k1"], []),
    (["--api_key", "k1", "k2"], ["k1", "k2"], []),
    (["--max-num-seqs", "4"], [], ["--max-num-seqs", "4"]),
])
def test_keys_are_found_in_any_spelling(argv, keys, kept):
    from entrypoint.launcher.access import keys_in, without_keys
    from entrypoint.redact import redact_argv

    assert keys_in(argv) == keys and without_keys(argv) == kept
    assert not set(keys) & set(" ".join(redact_argv(argv)).replace("=", " ").split())


@pytest.mark.parametrize("args", [["--host", "0.0.0.0"], ["--host=::"], ["--host", "10.1.2.3", "--max-num-seqs", "4"],
                                  ["--host", "0.0.0.0", "--host", "0.0.0.0"]])
def test_vllm_behind_the_bridge_stays_on_loopback_whatever_the_container_says(launcher, tmp_path, args):
    """A --host among the container arguments (customary for vLLM images) would bind the keyless vLLM behind the
    bridge on every interface: the launcher drops it and says so."""
    plan = launcher.plan("h200_580", args=args)
    assert plan.option("--host") == ["127.0.0.1"] and plan.argv.count("--host") == 1, plan.argv
    assert not any(token.startswith("--host=") for token in plan.argv)
    assert plan.plan["bridge"]["vllm_host"] == "127.0.0.1"
    [decision] = plan.decision("vllm-host")
    assert decision["decision"].startswith("127.0.0.1, not the container's --host") and "loopback" in decision["why"]
    run = Run(launcher, tmp_path, "wait", args=args)  # the argv the real launcher starts vLLM with
    try:
        run.wait_for(lambda: run.lines(), "vllm did not start")
        started = run.lines()[0].split()
        assert started[started.index("--host") + 1] == "127.0.0.1" and started.count("--host") == 1, started
    finally:
        run.process.send_signal(signal.SIGTERM)
        run.finish()


def test_a_loopback_host_is_kept_and_with_the_bridge_off_the_host_is_vllms(launcher):
    assert launcher.plan("h200_580", args=["--host", "::1"]).option("--host") == ["::1"]
    plan = launcher.plan("h200_580", env={"VL_BRIDGE": "off"}, args=["--host", "0.0.0.0"])
    assert plan.option("--host") == ["0.0.0.0"] and not plan.decision("vllm-host")
