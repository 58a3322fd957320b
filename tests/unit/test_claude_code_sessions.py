"""The plugin's serving fixes for long Claude Code sessions: inline system messages folded as reminders
(prefix cache kept) and /v1/messages near the context limit (lowered max_tokens, a 400 Claude Code
compacts on). The pure parts here; what vLLM's own server code does with them runs in the image's
self-test (claude-code-sessions) and here too when PREBAKE_TEST_VLLM_PYTHON names a vLLM 0.27.1 venv.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel

from entrypoint.vllm_plugin.prebake_thinking import hooks
from entrypoint.vllm_plugin.prebake_thinking.inline_system import as_reminder, fold_inline_system
from entrypoint.vllm_plugin.prebake_thinking.lengths import anthropic_type, too_long_message

REPO = Path(__file__).resolve().parents[2]
PLUGIN_DIR = REPO / "entrypoint" / "vllm_plugin"
PROGRAM = REPO / "prebake" / "incontainer" / "programs" / "claude_code_sessions.py"

# Claude Code 2.1.197 reads the two figures with this expression and compacts by their difference.
CLAUDE_CODE_TOO_LONG = re.compile(r"prompt is too long[^0-9]*(\d+)\s*tokens?\s*>\s*(\d+)", re.I)


class Block(BaseModel):  # the fields of vLLM's AnthropicContentBlock the fold touches
    type: str
    text: str | None = None
    tool_use_id: str | None = None
    content: str | list[dict] | None = None


class Message(BaseModel):
    role: Literal["user", "assistant", "system"]
    content: str | list[Block]


def tool_turn(n: int) -> list[Message]:
    return [Message(role="assistant", content=[Block(type="text", text=f"step {n}")]),
            Message(role="user", content=[Block(type="tool_result", tool_use_id=f"t{n}", content=f"out {n}")])]


def test_a_reminder_goes_into_the_tool_result_message_before_it_and_earlier_messages_stay_the_same():
    first = [Message(role="user", content="go"), *tool_turn(1)]
    later = [*first, Message(role="system", content="task tools unused")]
    kept, leading = fold_inline_system(later, Block)
    assert leading == [] and all(m.role != "system" for m in kept)
    assert kept[:2] == first[:2]  # everything before the reminder's neighbour is untouched
    # Inside the tool result: a text block beside it would be a user message of its own, a new "query"
    # to the Qwen templates, which then drop the reasoning of every earlier assistant turn.
    assert kept[2].content == [Block(type="tool_result", tool_use_id="t1",
                                     content="out 1\n\n<system-reminder>\ntask tools unused\n</system-reminder>")]
    assert later[-1].role == "system" and later[2].content[0].content == "out 1"  # the caller's request is kept


def test_a_reminder_after_a_tool_result_with_a_list_content_is_one_more_text_item():
    messages = [Message(role="user", content=[Block(type="text", text="go"),
                                              Block(type="tool_result", tool_use_id="t", content="x")]),
                Message(role="system", content="r")]
    kept, _ = fold_inline_system(messages, Block)
    assert [b.type for b in kept[0].content] == ["text", "tool_result", "text"]  # a user turn already: a text block
    listed = [Message(role="user", content=[Block(type="tool_result", tool_use_id="t",
                                                  content=[{"type": "text", "text": "x"}])]),
              Message(role="system", content="r")]
    kept, _ = fold_inline_system(listed, Block)
    assert kept[0].content[0].content == [{"type": "text", "text": "x"},
                                          {"type": "text", "text": "<system-reminder>\nr\n</system-reminder>"}]


def test_a_reminder_after_an_assistant_message_opens_the_next_user_message_and_one_alone_ends_the_system():
    messages = [Message(role="system", content="agents"), Message(role="user", content="go"),
                Message(role="assistant", content="ok"), Message(role="system", content=[Block(type="text", text="r")]),
                Message(role="user", content="next"), Message(role="assistant", content="ok"),
                Message(role="system", content="tail")]
    kept, leading = fold_inline_system(messages, Block)
    assert [m.role for m in kept] == ["user", "assistant", "user", "assistant"]
    assert kept[0].content[0].text == "<system-reminder>\nagents\n</system-reminder>"
    assert [b.text for b in kept[2].content] == ["<system-reminder>\nr\n</system-reminder>", "next"]
    assert leading == ["<system-reminder>\ntail\n</system-reminder>"]


def test_billing_headers_and_empty_system_messages_are_dropped_as_vllm_drops_them():
    messages = [Message(role="user", content="go"),
                Message(role="system", content="x-anthropic-billing-header: cch=1;"),
                Message(role="system", content=[Block(type="text", text="")])]
    kept, leading = fold_inline_system(messages, Block)
    assert kept == messages[:1] and leading == []


def test_a_text_already_wrapped_as_a_reminder_is_not_wrapped_twice():
    assert as_reminder("<system-reminder>\nx\n</system-reminder>\n") == "<system-reminder>\nx\n</system-reminder>"


@pytest.mark.parametrize("tokens, limit, said", [(270000, 262144, 262144), (262144, 262144, 262143)])
def test_too_long_is_said_as_claude_code_reads_it(tokens, limit, said):
    message = too_long_message(tokens, limit)
    assert message == f"prompt is too long: {tokens} tokens > {said} maximum"
    actual, maximum = map(int, CLAUDE_CODE_TOO_LONG.search(message).groups())
    assert actual - maximum > 0  # what Claude Code compacts by


def test_error_types_are_anthropics():
    assert [anthropic_type(s) for s in (400, 404, 413, 418, 500, 502)] == [
        "invalid_request_error", "not_found_error", "request_too_large", "invalid_request_error", "api_error",
        "api_error"]


def test_the_plugins_anthropic_error_types_are_the_bridges_one_table():
    """The plugin answers inside vLLM, where the bridge's package is not importable: its table is a copy of the
    bridge's (serving/api.py), which says each status as Anthropic's API does (a 503 and a 529: overloaded_error)."""
    from entrypoint.serving.api import ERROR_TYPES, error_type
    from entrypoint.vllm_plugin.prebake_thinking.lengths import ANTHROPIC_TYPES

    assert ANTHROPIC_TYPES == ERROR_TYPES["anthropic"]
    assert all(anthropic_type(status) == error_type("anthropic", status) for status in range(400, 600))
    assert error_type("anthropic", 503) == error_type("anthropic", 529) == "overloaded_error"


def test_patches_for_a_module_another_install_waits_for_run_in_turn(tmp_path, monkeypatch):
    (tmp_path / "prebake_fake_serving.py").write_text("calls = []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    hooks.after_import({"prebake_fake_serving": lambda m: m.calls.append("thinking")})
    hooks.after_import({"prebake_fake_serving": lambda m: m.calls.append("sessions")})
    assert sum(isinstance(f, hooks._PatchAfterImport) for f in sys.meta_path) == 1
    import prebake_fake_serving

    assert prebake_fake_serving.calls == ["thinking", "sessions"]
    assert not any(isinstance(f, hooks._PatchAfterImport) for f in sys.meta_path)
    monkeypatch.delitem(sys.modules, "prebake_fake_serving")


VLLM_PYTHON = os.environ.get("PREBAKE_TEST_VLLM_PYTHON")


def plugin_path(tmp_path: Path) -> str:
    """This checkout's plugin as an installed distribution (its entry point found first), and torchvision,
    torchaudio and torchcodec hidden: a CPU venv's copies may not match its torch, and text serving needs none."""
    info = tmp_path / "prebake_thinking-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: prebake-thinking\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nprebake_thinking = prebake_thinking:register\n")
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nfor _name in ('torchvision', 'torchaudio', 'torchcodec'):\n    sys.modules.setdefault(_name, None)\n")
    return os.pathsep.join([str(tmp_path), str(PLUGIN_DIR)])


@pytest.mark.skipif(not VLLM_PYTHON, reason="PREBAKE_TEST_VLLM_PYTHON (a venv with vllm==0.27.1) is not set")
@pytest.mark.parametrize("plugins", ["loaded", "none"])
def test_vllms_own_server_with_and_without_the_plugin(plugins, tmp_path):
    env = dict(os.environ, VLLM_LOGGING_LEVEL="ERROR", PYTHONPATH=plugin_path(tmp_path),
               **({"VLLM_PLUGINS": "none"} if plugins == "none" else {}))
    done = subprocess.run([VLLM_PYTHON, str(PROGRAM)], env=env, capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    failed = {item["case"] for item in report["results"] if not item["ok"]}
    if plugins == "loaded":
        assert done.returncode == 0 and not failed and report["plugin"] == "loaded", report
    else:  # vLLM alone: the merge breaks the prefix, lengths give 500s, a bad body OpenAI's error shape
        assert done.returncode == 1 and report["plugin"] == "not loaded"
        assert failed == {"prefix kept when a reminder arrives",
                          "prompt fits, prompt + max_tokens does not: max_tokens lowered",
                          "prompt too long: 400 prompt is too long",
                          "count_tokens over the context: counted",
                          "invalid body: 400 with an Anthropic error"}, report
