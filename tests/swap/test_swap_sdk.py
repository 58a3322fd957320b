"""The official SDKs behind nginx set up as RunPod's proxy (proxy_read_timeout 2 s), each model taking 3 s to
start: every swap is longer than the proxy lets a connection stay silent, and no caller is cut."""

from __future__ import annotations

import threading

from prebake_testing.servers import PROXY_TIMEOUT_S, start_nginx
from prebake_testing.clients import anthropic_client, openai_client

START_S = 3.0
assert START_S > PROXY_TIMEOUT_S


def openai_stream(proxy, model: str) -> str:
    stream = openai_client(proxy).chat.completions.create(
        model=model, messages=[{"role": "user", "content": "hi"}], stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "tok0 tok1 tok2 tok3 "
    return chunks[0].model


def anthropic_stream(proxy, model: str) -> str:
    with anthropic_client(proxy).messages.stream(model=model, max_tokens=16,
                                                 messages=[{"role": "user", "content": "hi"}]) as stream:
        final = stream.get_final_message()
    assert final.content[0].text == "tok0 tok1 tok2 tok3 "
    return final.model


def test_sdks_swap_both_ways_several_times_through_the_proxy(pods, tmp_path):
    pod = pods({"ornith": {"start_s": START_S}, "qwen": {"start_s": START_S}}, ready=False)
    pod.wait_ready(timeout=30)
    proxy = start_nginx(tmp_path / "nginx", pod.port)
    try:
        sequence = [("openai", "qwen"), ("anthropic", "claude-ornith"), ("anthropic", "claude-qwen[1m]"),
                    ("openai", "ornith")]
        for api, model in sequence:
            answered = (openai_stream if api == "openai" else anthropic_stream)(proxy, model)
            assert answered == model.removeprefix("claude-").removesuffix("[1m]")
        whole = openai_client(proxy).chat.completions.create(model="qwen", messages=[{"role": "user", "content": "x"}])
        assert whole.model == "qwen" and whole.choices[0].message.content == "tok0 tok1 tok2 tok3 "
        assert pod.swaps() == 5
    finally:
        proxy.stop()


def test_concurrent_sdk_callers_on_both_models_through_the_proxy(pods, tmp_path):
    pod = pods({"ornith": {"start_s": START_S}, "qwen": {"start_s": START_S}}, ready=False)
    pod.wait_ready(timeout=30)
    proxy = start_nginx(tmp_path / "nginx", pod.port)
    answers: list[tuple[str, str]] = []
    failures: list[BaseException] = []

    def caller(api: str, model: str) -> None:
        try:
            answers.append((model, (openai_stream if api == "openai" else anthropic_stream)(proxy, model)))
        except BaseException as err:  # noqa: BLE001 - reported by the test below
            failures.append(err)

    try:
        callers = [threading.Thread(target=caller, args=(api, model))
                   for api in ("openai", "anthropic") for model in ("qwen", "ornith", "qwen")]
        for thread in callers:
            thread.start()
        for thread in callers:
            thread.join(90)
        assert not failures, failures
        assert sorted(answers) == sorted([("qwen", "qwen")] * 4 + [("ornith", "ornith")] * 2)
        assert pod.swaps() <= 2, pod.stderr()  # qwen's callers share one swap; ornith's wait for the way back
    finally:
        proxy.stop()
