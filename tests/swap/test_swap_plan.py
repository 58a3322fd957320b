"""VL_SWAP at start: the set, each model's own decisions in --dry-run, and the errors that stop a start;
the names a request may use, read from as few bytes as possible."""

from __future__ import annotations

import asyncio
import json

import pytest

from entrypoint.launcher.knobs import BadValue, swap_pairs
from entrypoint.claudecode_wire import is_background
from entrypoint.modelnames import NameMap
from entrypoint.serving.requestbody import BodyAmbiguous, RequestBody
from prebake_testing.hosts import Launcher

SCRIPT_PAIR = "ornith:ornithnvfp4,qwen38:qwen38nvfp4"


@pytest.fixture
def launcher(tmp_path) -> Launcher:
    return Launcher(tmp_path)


def test_dry_run_shows_the_set_and_each_models_own_decisions(launcher):
    result = launcher.plan("rtxpro6000_580", env={"VL_MODEL": "ornithnvfp4", "VL_SWAP": SCRIPT_PAIR})
    swap = result.plan["swap"]
    assert [(m["name"], m["key"]) for m in swap["models"]] == [("ornith", "ornithnvfp4"), ("qwen38", "qwen38nvfp4")]
    assert swap["models"][0]["argv"] == result.argv  # the first model is what starts
    qwen = swap["models"][1]
    assert qwen["argv"][2] == "unsloth/Qwen3.8-27B-NVFP4"
    assert qwen["argv"][qwen["argv"].index("--served-model-name") + 1:][:3] == ["qwen38", "claude-qwen38",
                                                                                "claude-qwen38[1m]"]
    # Its own decisions: MTP speculation (its catalogue default), so no async scheduling; Ornith has neither.
    topics = {d["topic"]: d["decision"] for d in qwen["decisions"]}
    assert topics["speculation"].startswith("mtp") and topics["async-scheduling"] == "off"
    assert "--speculative-config" in qwen["argv"] and "--speculative-config" not in result.argv
    assert "--max-model-len" in qwen["argv"] and qwen["argv"] != result.argv
    [decision] = result.decision("swap")
    assert decision["decision"] == "2 models: ornith (ornithnvfp4), qwen38 (qwen38nvfp4); ornith starts first"
    assert (swap["drain_s"], swap["stop_s"], swap["load_s"]) == (300.0, 20.0, 1200.0)


def test_vl_model_starts_first_and_takes_the_name_it_shares_with_a_pair(launcher):
    result = launcher.plan("a40x1_580", env={"VL_MODEL": "ornith", "VL_SWAP": "ornith:ornithnvfp4,qwen:qwen"})
    assert [(m["name"], m["key"]) for m in result.plan["swap"]["models"]] == [("ornith", "ornith"), ("qwen", "qwen")]
    assert "VL_MODEL=ornith serves 'ornith' instead of ornithnvfp4" in [d["decision"] for d in result.decision("swap")]
    third = launcher.plan("a40x1_580", env={"VL_MODEL": "kimi", "VL_SWAP": "ornith:ornithnvfp4,qwen:qwen"})
    assert [m["name"] for m in third.plan["swap"]["models"]] == ["kimi", "ornith", "qwen"]


def test_without_vl_swap_nothing_changes(launcher):
    for value in ("", "off"):
        result = launcher.plan("h200_580", env={"VL_SWAP": value})
        assert "swap" not in result.plan and not result.decision("swap")


def test_the_blackwell_default_is_the_scripts_pair():
    import tomllib
    from pathlib import Path

    defaults = tomllib.loads((Path(__file__).parents[2] / "images" / "blackwell.toml").read_text())["launch"]
    assert defaults["VL_SWAP"] == SCRIPT_PAIR


@pytest.mark.parametrize("env, needle", [
    ({"VL_SWAP": "ornith:ornith,qwen:nosuchkey"}, "VL_SWAP pair 'qwen:nosuchkey' names no catalogue model"),
    ({"VL_SWAP": SCRIPT_PAIR}, "VL_SWAP pair 'qwen38:qwen38nvfp4' cannot run on this host"),
    ({"VL_SWAP": "qwen"}, "'qwen' is not served-name:catalogue-key"),
    ({"VL_SWAP": "a:qwen,a:kimi"}, "the served name 'a' appears twice"),
    ({"VL_SWAP": "ornith:ornith"}, "leaves one model (ornith, VL_MODEL's)"),
    ({"VL_SWAP": "qwen:qwen", "VL_BRIDGE": "off"}, "VL_SWAP needs the keep-alive bridge"),
    ({"VL_SWAP": "qwen:qwen", "VL_SWAP_DRAIN": "0"}, "VL_SWAP_DRAIN='0'"),
    ({"VL_SWAP": "qwen:qwen", "VL_SWAP_STOP": "0.0000001"}, "at least 1 s: vLLM needs a moment"),
    ({"VL_SWAP": "qwen:qwen", "VL_SWAP_LOAD": "0.5"}, "at least 1 s: no model loads faster"),
    ({"VL_SWAP": "ornith:ornith,claude-ornith:dense"}, "the served name 'claude-ornith' is also what clients send "
                                                       "for 'ornith'"),
    ({"VL_MODEL": "qwen", "VL_SWAP": "claude-ornith:ornith,ornith:dense"}, "is also what clients send"),
    ({"VL_SWAP": "qwen:qwen", "VL_CTX": "500000"}, "VL_SWAP pair 'qwen:qwen' cannot be planned on this host"),
])
def test_a_set_that_cannot_run_stops_the_start_naming_the_pair(launcher, env, needle):
    result = launcher.run("a40x1_580", env=env)
    assert result.rc == 2 and needle in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_pairs_parse_as_the_script_wrote_them():
    assert swap_pairs("ornith:ornithnvfp4, qwen38:qwen38nvfp4") == (("ornith", "ornithnvfp4"),
                                                                   ("qwen38", "qwen38nvfp4"))
    assert swap_pairs("off") == () and swap_pairs("OFF") == ()
    for bad in ("ornith", ":qwen", "a:", "-x:qwen", "a:b:"):
        with pytest.raises(BadValue):
            swap_pairs(bad)


def test_names_clients_send_map_to_their_model():
    names = NameMap.of(["ornith", "qwen38"])
    assert [names.model(n) for n in ("ornith", "claude-ornith", "claude-ornith[1m]", "claude-qwen38")] == \
        ["ornith", "ornith", "ornith", "qwen38"]
    assert names.model("claude-sonnet-5") is None and names.model(None) is None and names.model("Ornith") is None


def test_background_calls_are_claude_codes_small_tool_less_ones():
    hook = {"model": "qwen38", "max_tokens": 64, "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": "x"}]}
    assert is_background("/v1/messages", json.dumps(hook).encode())
    schema = dict(hook, thinking=None, output_config={"format": {"type": "json_schema"}})
    assert is_background("/v1/messages", json.dumps(schema).encode())
    assert not is_background("/v1/messages", json.dumps(dict(hook, tools=[{"name": "Bash"}])).encode())
    assert not is_background("/v1/chat/completions", json.dumps(hook).encode())
    assert not is_background("/v1/messages", json.dumps(dict(hook, thinking={"type": "adaptive"})).encode())
    big = dict(hook, messages=[{"role": "user", "content": "x" * 300_000}])
    assert not is_background("/v1/messages", json.dumps(big).encode())


def renamed(body: bytes, name: str, size: int) -> bytes:
    """`body` streamed in chunks of `size` bytes, read ahead whole, its model renamed, sent on."""
    async def run() -> bytes:
        parts = [body[i:i + size] for i in range(0, len(body), size)] or [b""]
        messages = [{"type": "http.request", "body": part, "more_body": i < len(parts) - 1}
                    for i, part in enumerate(parts)]

        async def receive():
            return messages.pop(0)
        held = RequestBody(receive, [(b"content-length", str(len(body)).encode())], scan=True)
        while not held.done.is_set():  # whole: the rename is checked on every byte (read_head stops at its head)
            held.held.append(await held._receive_chunk())
        assert held.rename_model(name)
        out = b"".join([chunk async for chunk in held.chunks()])
        assert int(held.upstream_content_length()) == len(out)
        return out
    return asyncio.run(run())


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_a_renamed_body_keeps_every_byte_but_the_model_name(size):
    body = b'{"model": "claude-qwen38", "messages": [{"content": "model"}],  "x": 1}'
    assert renamed(body, "ornith", size) == b'{"model": "ornith", "messages": [{"content": "model"}],  "x": 1}'
    late = b'\xef\xbb\xbf{"messages": [{"model": "x"}], "model" : "claude-\\u006fpus-4-8" }'  # a BOM, an escape
    assert renamed(late, "ornith", size) == late.replace(b'"claude-\\u006fpus-4-8"', b'"ornith"')
    twice = b'{"model": "a", "stream": true, "model": "claude-opus-4-8"}'  # json.loads keeps the last one
    with pytest.raises(BodyAmbiguous, match='"model" more than once'):  # refused: the bridge renamed the first
        renamed(twice, "o\u00e9", size)
