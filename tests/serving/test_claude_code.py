"""The real Claude Code CLI (npm's @anthropic-ai/claude-code) at the oldest supported and the newest checked version
(entrypoint/claudecode.toml) against the bridge and a stand-in vLLM that checks model names as vLLM does: its own
model names are answered, a wrong key ends it in seconds with the bridge's message instead of minutes of silent
retries, its thinking settings reach vLLM as the thinking plugin reads them, and the paste block of the quickstart
and of the status page works as pasted, in an interactive bash under tmux too. A version not installed is skipped
with the command that installs it (.ci/run installs both)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from entrypoint.claudecode import paste_block, settings
from entrypoint.launcher.effort import default_budgets
from entrypoint.vllm_plugin.prebake_thinking.policy import (ThinkingPolicy, anthropic_fields, sampling_budget,
                                                             template_kwargs)
from prebake_testing import claudecli
from prebake_testing.hosts import ROOT
from prebake_testing.servers import StandIn, start_bridge
from prebake_testing.net import get, request, wait_for_port, wait_healthy
from prebake_testing.pods import Run
from prebake_testing.hosts import Launcher
from prebake_testing.tty import InteractiveShell

KEY = "sk-pod-claude-code-7f3e"
SERVED = ["ornith", "claude-ornith", "claude-ornith[1m]"]


@pytest.fixture(params=claudecli.versions())
def cli(request) -> str:
    """The `claude` binary of one supported version."""
    found = claudecli.binary(request.param)
    if found is None:
        pytest.skip(claudecli.install_hint(request.param))
    return found


@pytest.fixture(scope="module")
def pod():
    vllm = StandIn(args=["--served-model-name", *SERVED], env={"STANDIN_STRICT_NAMES": "1", "STANDIN_KEEP_REQUESTS": "1"})
    bridge = start_bridge(vllm.port, key=KEY, extra=["--served-names", json.dumps(SERVED)])
    yield vllm, bridge
    bridge.stop()
    vllm.stop()


def claude(cli: str, bridge, tmp_path, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    full = {name: value for name, value in os.environ.items() if not name.startswith(("ANTHROPIC_", "CLAUDE_"))}
    full.update({"HOME": str(home), "ANTHROPIC_BASE_URL": bridge.url, "DISABLE_TELEMETRY": "1",
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **env})
    began = time.monotonic()
    done = subprocess.run([cli, "-p", "say hi", *args], env=full, capture_output=True, text=True, timeout=60)
    return done, time.monotonic() - began


@pytest.mark.parametrize("args", [(), ("--model", "haiku"), ("--model", "opus")])
def test_claude_codes_own_model_names_are_answered(cli, pod, tmp_path, args):
    done, _ = claude(cli, pod[1], tmp_path, *args, ANTHROPIC_AUTH_TOKEN=KEY)
    assert done.returncode == 0 and "tok0" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("variable", ["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"])
def test_a_wrong_key_stops_claude_code_at_once_naming_the_pods_key(cli, pod, tmp_path, variable):
    done, took = claude(cli, pod[1], tmp_path, **{variable: "sk-not-this-pods"})
    output = done.stdout + done.stderr
    assert done.returncode != 0 and took < 30, (took, output)  # a plain 401 was retried for ~3 minutes
    assert "Failed to authenticate. API Error: 401 wrong API key" in output and "VLLM_API_KEY" in output, output


QWEN3 = ThinkingPolicy(default_budgets(), {"enable_thinking": False}, True)  # ornith's policy (a Qwen3 template)


@pytest.mark.parametrize("thinking_off", [{}, {"MAX_THINKING_TOKENS": "0"}, {"CLAUDE_CODE_DISABLE_THINKING": "1"}])
def test_thinking_settings_reach_the_engine_as_anthropic_means_them(cli, pod, tmp_path, thinking_off):
    """With the block's settings: by default Claude Code asks for adaptive thinking with effort high, which gets
    the `high` budget; with thinking turned off it sends no `thinking` but still effort high (2.1.332), which is
    no thinking on Anthropic's API, and reasoning off through the thinking plugin (its policy functions on the
    bodies vLLM got; docs/entrypoint.md "Thinking controls")."""
    vllm, bridge = pod
    before = len(vllm.requests())
    done, _ = claude(cli, bridge, tmp_path, ANTHROPIC_AUTH_TOKEN=KEY, **dict(settings("ornith", 524288)), **thinking_off)
    assert done.returncode == 0 and "tok0" in done.stdout, done.stdout + done.stderr
    main = [r["request"] for r in vllm.requests()[before:] if r["path"] == "/v1/messages" and r["request"].get("tools")]
    assert main, vllm.requests()[before:]
    for body in main:
        effort = (body.get("output_config") or {}).get("effort")
        fields = anthropic_fields(body.get("thinking"), effort, QWEN3)
        reasoning_effort = fields.get("reasoning_effort", effort)  # vLLM's own conversion copies the effort
        budget = sampling_budget(reasoning_effort, fields.get("thinking_token_budget"), body["max_tokens"], QWEN3)
        kwargs = template_kwargs(reasoning_effort, None, QWEN3)
        if thinking_off:
            assert "thinking" not in body and (budget, kwargs) == (None, {"enable_thinking": False}), body
        else:
            assert body["thinking"]["type"] == "adaptive" and effort == "high", body
            assert (budget, kwargs) == (QWEN3.budgets["high"], None), body


def paste(cli: str, block: str, url: str, tmp_path, prompt: str, key: str = KEY) -> subprocess.CompletedProcess:
    """Run a paste block as a script, `claude` being `CLI -p PROMPT` (its last line starts Claude Code)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update({"HOME": str(home), "POD": url, "VLLM_API_KEY": key, "PROMPT": prompt, "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLI": cli})
    script = 'claude() { "$CLI" -p "$PROMPT"; }\n' + block
    return subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=90)


def quickstart_block() -> str:
    text = (ROOT / "docs" / "quickstart.md").read_text()
    section = text.split("## 5. Connect Claude Code", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def test_the_quickstart_block_is_the_generators():
    """One block, as the generator writes it for a40 on 2 A40s (ornith, 1,000,000 tokens): the status page
    prints the same lines for its own pod."""
    assert quickstart_block() == paste_block('"$POD"', "ornith", 1_000_000)


def test_the_quickstart_block_works_as_pasted(cli, pod, tmp_path):
    """`/context` shows the pod's model and context, with no warning (2.1.332 warned against
    CLAUDE_CODE_DISABLE_1M_CONTEXT with a compaction window above 200,000)."""
    shown = paste(cli, quickstart_block(), pod[1].url, tmp_path, "/context")
    assert shown.returncode == 0 and "**Model:** ornith" in shown.stdout and "/ 1m" in shown.stdout, shown
    assert "isn't enforced" not in shown.stdout + shown.stderr, shown
    answered = paste(cli, quickstart_block(), pod[1].url, tmp_path, "say hi")
    assert answered.returncode == 0 and "tok0" in answered.stdout, answered


def test_the_status_page_prints_the_block_for_its_pod(tmp_path):
    """A launched pod (1 A40: ornith at 524,288 tokens) prints the block with its own address, model and context;
    pasted with that address, it works."""
    run = Run(Launcher(tmp_path), tmp_path, "serve", env={
        "VLLM_API_KEY": KEY, "RUNPOD_POD_ID": "abc123xyz", "VL_CACHE_ROOT": str(tmp_path / "volume"),
        "STANDIN_STRICT_NAMES": "1"}, profile="a40x1_580")
    try:
        wait_for_port(run.port, run.process, "the bridge")
        auth = {"authorization": f"Bearer {KEY}"}
        wait_healthy(run.port, run.process, headers=auth)
        status, _, page = get(run.port, "/prebake/status", auth)
        url = f"https://abc123xyz-{run.port}.proxy.runpod.net"
        assert status == 200 and page["claude_code"] == {
            "model": "ornith", "context": 524288, "base_url": url, "swaps_to": [],
            "paste": paste_block(url, "ornith", 524288)}
        text = request(run.port, "GET", "/prebake/status.txt", headers=auth)[2].decode()
        assert "\n".join("    " + line for line in page["claude_code"]["paste"].splitlines()) in text
        assert 'ANTHROPIC_AUTH_TOKEN="$VLLM_API_KEY"' in text and KEY not in text
        assert get(run.port, "/prebake/status")[2].get("claude_code") is None  # without the key: not shown
        for version in claudecli.versions():
            cli = claudecli.binary(version)
            if cli is None:
                continue
            block = page["claude_code"]["paste"].replace(url, f"http://127.0.0.1:{run.port}")
            shown = paste(cli, block, "", tmp_path, "/context")
            assert shown.returncode == 0 and "**Model:** ornith" in shown.stdout and "/ 524.3k" in shown.stdout, shown
            assert "isn't enforced" not in shown.stdout + shown.stderr, shown
    finally:
        run.stop()


def test_the_quickstart_lists_exactly_the_aliases_the_pod_serves():
    """The names the quickstart says the pod answers to are VL_ALIASES' default, no more (it once listed [1m]
    haiku names the pod did not serve) and no fewer (the deepseek names were served but not mentioned)."""
    from entrypoint.launcher.knobs import KNOBS_BY_NAME

    text = (ROOT / "docs" / "quickstart.md").read_text()
    listed = text.split("`VL_ALIASES`, by default ", 1)[1].split("(`GET", 1)[0]
    names = [name for name in listed.replace("\n", " ").split("`")[1::2]]
    assert names == KNOBS_BY_NAME["VL_ALIASES"].default.split()


@pytest.mark.parametrize("missing, message", [("POD", "set POD to the address of the pod"),
                                              ("VLLM_API_KEY", "set VLLM_API_KEY to the API key of the pod")])
def test_the_block_stops_on_an_unset_variable_before_starting_claude(tmp_path, missing, message):
    """Pasted in a new shell without POD (Claude Code would go to Anthropic's API) or the key (it would say
    "Not logged in"), the block says which variable to set; `claude` never starts."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "POD": "http://127.0.0.1:9", "VLLM_API_KEY": KEY}
    del env[missing]
    script = 'claude() { echo started; }\n' + quickstart_block()
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and message in done.stderr and "started" not in done.stdout


@pytest.mark.parametrize("size", ["²", "٣"])
def test_no_block_without_a_context(size):
    # "²".isdigit() is True and int("²") raises: the status page's block must not fail on a --max-model-len vLLM
    # refuses; and a block without the context would let Claude Code guess it, so there is none
    from entrypoint.claudecode import for_pod

    argv = ["vllm", "serve", "x", "--served-model-name", "ornith"]
    assert for_pod({"argv": argv + ["--max-model-len", size]}, {}) is None and for_pod({"argv": argv}, {}) is None
    assert for_pod({"argv": argv + ["--max-model-len", "4096"]}, {})["context"] == 4096


UNSET = [("POD", "set POD to the address of the pod, https://<pod id>-8080.proxy.runpod.net"),
         ("VLLM_API_KEY", "set VLLM_API_KEY to the API key of the pod"), (None, "")]
FAKE_CLAUDE = 'claude() { echo "claude-""started at ${ANTHROPIC_BASE_URL:-Anthropic} on ${CLAUDE_CODE_MAX_CONTEXT_TOKENS:-?}"; }\n'


def pasted_lines(missing: str | None, shell: str, tmp_path, url: str, bracketed: bool = False) -> list[str]:
    env = {"HOME": str(tmp_path), "POD": url, "VLLM_API_KEY": KEY}
    if missing:
        del env[missing]
    session = InteractiveShell(env, shell=shell)
    try:
        session.paste(FAKE_CLAUDE)
        return [line.rstrip() for line in session.paste(quickstart_block(), bracketed=bracketed).splitlines()]
    finally:
        session.close()


def check_run(printed: list[str], missing: str | None, message: str, url: str) -> None:
    started = [line for line in printed if line.startswith("claude-started")]
    if missing:
        assert message in printed and not started, printed
    else:
        assert started == [f"claude-started at {url} on 1000000"] and not any(
            line.startswith("set ") or "not found" in line or "not valid" in line for line in printed), printed


@pytest.mark.parametrize("bracketed", [False, True], ids=["typed", "bracketed"])
@pytest.mark.parametrize("shell", ["bash", "zsh"])
@pytest.mark.parametrize("missing, message", UNSET)
def test_the_block_pasted_into_an_interactive_shell_runs_only_with_both_variables(tmp_path, shell, missing, message,
                                                                                   bracketed, pod):
    """What a paste is: an interactive bash reads the block line by line and goes on after a failed line, so a
    `${POD:?}` stopped only its own line and `claude` then started against Anthropic's API; an interactive zsh with
    its default options (macOS's shell, `zsh -f`) takes `#` as a word, so a comment's apostrophe opened a quote and
    the paste hung at `quote>`. Pasted under tmux, the block says which variable to set and runs nothing else; with
    both set it exports every setting and starts `claude`. Typed line by line, and as a bracketed paste (the whole
    block in the line editor, then Enter), as terminals paste into both shells by default."""
    url = pod[1].url
    check_run(pasted_lines(missing, shell, tmp_path, url, bracketed), missing, message, url)


@pytest.mark.parametrize("shell", [["bash", "--norc", "--noprofile", "-i"], ["zsh", "-f", "-i"]])
@pytest.mark.parametrize("missing, message", UNSET)
def test_the_block_piped_into_an_interactive_shell_runs_only_with_both_variables(tmp_path, shell, missing, message,
                                                                                  pod):
    """The same through a pipe into `bash -i` and `zsh -f -i` (how the zsh hang was first reproduced): the
    shell exits at the end of its input, so a block left open (`quote>`, `if>`) would end in a syntax error."""
    url = pod[1].url
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "POD": url, "VLLM_API_KEY": KEY}
    if missing:
        del env[missing]
    done = subprocess.run(shell, input=FAKE_CLAUDE + quickstart_block() + "echo end-of-paste\n", env=env,
                          capture_output=True, text=True, timeout=60)
    assert "end-of-paste" in done.stdout and "parse error" not in done.stderr and "syntax error" not in done.stderr, \
        (done.stdout, done.stderr)
    # the shell's prompts go to stderr, on the lines of what the block printed there
    said = [message] if message and message in done.stderr else []
    check_run([line.strip() for line in done.stdout.splitlines()] + said, missing, message, url)
    assert not any(other in done.stderr for _, other in UNSET if other and other != message), done.stderr


def test_build_py_prints_the_block_for_a_variant_from_anywhere(tmp_path):
    """`./build.py claude-code` works from any folder: a40's default model at 2 A40s' context is the quickstart's block;
    a catalogue key gives its served name (ornithnvfp4 is served as ornith)."""
    def printed(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, str(ROOT / "build.py"), "claude-code", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)

    assert printed("--variant", "a40", "--context", "1000000").stdout == quickstart_block()
    assert printed("--model", "ornithnvfp4", "--context", "1000000").stdout == quickstart_block()
    missing = printed("--context", "1000000")
    assert missing.returncode != 0 and "give --model" in missing.stderr and not missing.stdout
    # without the context Claude Code would guess it (200k or 1m by version, with a warning): no block at all
    guessed = printed("--variant", "a40")
    assert guessed.returncode != 0 and "give --context" in guessed.stderr and not guessed.stdout


def test_readmes_one_line_command_carries_the_blocks_settings():
    """README's one-line Claude Code command once had no model settings: Claude Code then assumed 1,000,000 tokens
    on a 524,288-token pod."""
    import shlex

    line = next(line for line in (ROOT / "README.md").read_text().splitlines()
                if line.startswith("`ANTHROPIC_BASE_URL=") and line.endswith(" claude`"))
    words = shlex.split(line.strip("`").replace("<pod id>", "POD_ID"))
    assert words[-1] == "claude"
    given = dict(word.split("=", 1) for word in words[:-1])
    assert {name: given[name] for name in given if name not in ("ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN")} \
        == dict(settings("ornith", 524288))


def test_the_docs_state_the_supported_range():
    supported = claudecli.supported()
    text = " ".join((ROOT / "docs" / "quickstart.md").read_text().split())
    assert f"Claude Code {supported['oldest']} to {supported['newest']}" in text
    assert f"installs Claude Code {supported['newest']}, the newest version checked here" in text


def test_the_block_pasted_into_an_interactive_bash_starts_claude_on_the_pods_context(cli, pod, tmp_path):
    """The status page's block for a 524,288-token pod, pasted under tmux: interactive Claude Code starts on the pod's
    model and `/context` shows the pod's context, with no warning about the 200K limit (2.1.332 printed one against
    CLAUDE_CODE_DISABLE_1M_CONTEXT)."""
    home = tmp_path / "home"
    home.mkdir()
    # a first start asks for a theme and whether to trust the folder: answered as a user would have before
    (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True, "theme": "dark",
                                                   "projects": {str(tmp_path): {"hasTrustDialogAccepted": True}}}))
    shell = InteractiveShell({"HOME": str(home), "POD": pod[1].url, "VLLM_API_KEY": KEY, "DISABLE_TELEMETRY": "1",
                             "PATH": f"{os.path.dirname(cli)}:{os.environ['PATH']}"})
    try:
        shell.paste(f"cd {tmp_path}\n")
        shell.tmux("set-buffer", "-b", "block", paste_block('"$POD"', "ornith", 524288))
        shell.tmux("paste-buffer", "-d", "-b", "block", "-t", "main")
        shell.wait_for("API Usage Billing")
        shell.tmux("send-keys", "-t", "main", "/context", "Enter")
        screen = shell.wait_for("Auto-compact window:")
    finally:
        shell.close()
    [window] = [line.split(":", 1)[1].strip() for line in screen.splitlines() if "Auto-compact window:" in line]
    assert "/524.3k tokens" in screen and window == "524.3k tokens" and "isn't enforced" not in screen, screen


@pytest.mark.parametrize("shell", [["bash", "--norc", "--noprofile", "-i"], ["zsh", "-f", "-i"]])
def test_a_swapping_pods_block_pipes_into_an_interactive_shell(tmp_path, shell, pod):
    """A swap set's block says how to switch models (an echo, not a comment: zsh without interactivecomments)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "POD": pod[1].url, "VLLM_API_KEY": KEY}
    block = paste_block('"$POD"', "ornith", 262144, ("qwen38",))
    done = subprocess.run(shell, input='claude() { echo "claude-""started $ANTHROPIC_DEFAULT_SONNET_MODEL"; }\n' + block,
                          env=env, capture_output=True, text=True, timeout=60)
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert lines[-2:] == ["this pod swaps between ornith, qwen38: /model NAME in Claude Code picks one (the first "
                          "request for it waits for the swap)", "claude-started qwen38"], (done.stdout, done.stderr)


POD_PROBLEMS = {  # what the block says, in one line, before Claude Code would retry silently for minutes
    "refused": "the pod cannot be reached (no answer within 5 s)",
    "unknown name": "the pod cannot be reached (no answer within 5 s)",
    "RunPod's 502": "RunPod answers 502 for the pod: nothing listens on it yet (the image is still being pulled",
    "wrong key": "the pod refused the key: VLLM_API_KEY is not its key",
}


@pytest.mark.parametrize("problem", POD_PROBLEMS)
def test_the_block_checks_the_pod_and_says_in_one_line_what_is_wrong(tmp_path, pod, problem):
    """A refused port, a name that does not resolve, RunPod's 502 page while the image is pulled, a wrong key: the
    block says which in one line within seconds and starts nothing (Claude Code alone took ~175 s, then printed
    its own text: troubleshooting.md)."""
    from entrypoint.claudecode import CHECK_S
    from prebake_testing.net import free_port
    from prebake_testing.runpod_proxy import PullingPod

    def run(url: str, key: str) -> tuple[subprocess.CompletedProcess, float]:
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "POD": url, "VLLM_API_KEY": key}
        began = time.monotonic()
        done = subprocess.run(["bash", "-c", FAKE_CLAUDE + quickstart_block()], env=env, capture_output=True,
                              text=True, timeout=30)
        return done, time.monotonic() - began

    if problem == "RunPod's 502":
        with PullingPod() as url:
            done, took = run(url, KEY)
    else:
        url = {"refused": f"http://127.0.0.1:{free_port()}", "unknown name": "http://pod-that-is-not.invalid",
               "wrong key": pod[1].url}[problem]
        done, took = run(url, "not-the-key" if problem == "wrong key" else KEY)
    # curl gives up after CHECK_S; a refused port, an unknown name, an answer take far less
    assert done.returncode != 0 and "claude-started" not in done.stdout and took < CHECK_S + 1, (done, took)
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(POD_PROBLEMS[problem]), done.stderr
    answered, _ = run(pod[1].url, KEY)  # the same block, the pod reachable with its key: Claude Code starts
    assert answered.stdout.startswith("claude-started") and not answered.stderr, answered


def test_the_block_installs_a_checked_claude_code_under_home_without_root(tmp_path, pod):
    """Without `claude`, the block says it installs the newest checked version (claudecode.toml) with npm under
    ~/.local, and runs what npm installed there (a stand-in npm records its arguments and installs a stand-in)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    npm = tools / "npm"
    npm.write_text('#!/bin/sh\necho "$@" > "$HOME/npm-args"\nmkdir -p "$HOME/.local/bin"\n'
                   'printf \'#!/bin/sh\\necho claude-installed-started "$ANTHROPIC_MODEL"\\n\' > "$HOME/.local/bin/claude"\n'
                   'chmod +x "$HOME/.local/bin/claude"\n')
    npm.chmod(0o755)
    bins = [f"{tools}", "/usr/bin", "/bin"]
    assert not any(os.path.exists(os.path.join(folder, "claude")) for folder in bins)
    env = {"PATH": ":".join(bins), "HOME": str(tmp_path), "POD": pod[1].url, "VLLM_API_KEY": KEY}
    done = subprocess.run(["bash", "-c", quickstart_block()], env=env, capture_output=True, text=True, timeout=30)
    newest = claudecli.supported()["newest"]
    assert done.returncode == 0 and done.stdout.splitlines() == [
        f"installing Claude Code {newest} (the newest version prebake checks) with npm under ~/.local, no root needed",
        "claude-installed-started ornith"], done
    assert (tmp_path / "npm-args").read_text().split() == [
        "install", "-g", "--prefix", f"{tmp_path}/.local", f"@anthropic-ai/claude-code@{newest}"]
