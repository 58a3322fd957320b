"""What the docs quote of Claude Code, checked against the real CLI at each supported version (entrypoint/claudecode.toml)
with the real bridge and a stand-in vLLM: the context it assumes for the pod's model without the block's settings
(and 2.1.332's warning), that the block's settings leave no warning at any pod size, its text for a model name the pod
does not serve (404), what it shows while a request is held during vLLM's start, and what it prints when the start
outlasts the hold. Each quoted text is looked for both in the CLI's output and in the doc that quotes it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from entrypoint.claudecode import paste_block, settings
from prebake_testing import claudecli
from prebake_testing.hosts import ROOT
from prebake_testing.net import free_port, wait_until
from prebake_testing.pods import KEY, Pod
from prebake_testing.servers import StandIn, start_bridge
from prebake_testing.tty import InteractiveShell

SERVED = ["ornith", "claude-ornith"]
QUICKSTART = ROOT / "docs" / "quickstart.md"
TROUBLESHOOTING = ROOT / "docs" / "troubleshooting.md"


def flat(path) -> str:
    return " ".join(path.read_text().split())


@pytest.fixture(params=claudecli.versions())
def cli(request) -> tuple[str, str]:
    found = claudecli.binary(request.param)
    if found is None:
        pytest.skip(claudecli.install_hint(request.param))
    return request.param, found


@pytest.fixture(scope="module")
def pod():
    vllm = StandIn(args=["--served-model-name", *SERVED], env={"STANDIN_STRICT_NAMES": "1"})
    bridge = start_bridge(vllm.port, key=KEY, extra=["--served-names", json.dumps(SERVED)])
    yield bridge
    bridge.stop()
    vllm.stop()


def environment(tmp_path, url: str, **extra: str) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {name: value for name, value in os.environ.items() if not name.startswith(("ANTHROPIC_", "CLAUDE_"))}
    env.update({"HOME": str(home), "ANTHROPIC_BASE_URL": url, "ANTHROPIC_AUTH_TOKEN": KEY, "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", **extra})
    return env


def claude(cli: str, env: dict[str, str], prompt: str) -> subprocess.CompletedProcess:
    return subprocess.run([cli, "-p", prompt], env=env, capture_output=True, text=True, timeout=90)


def window(context_page: str) -> str:
    """The window `/context` shows: `**Tokens:** 2.6k / 200k (1%)` -> "200k"."""
    return re.search(r"\*\*Tokens:\*\* \S+ / (\S+)", context_page).group(1)


def test_the_context_it_assumes_without_the_blocks_settings_is_the_quickstarts(cli, pod, tmp_path):
    version, binary = cli
    shown = claude(binary, environment(tmp_path, pod.url, ANTHROPIC_MODEL="ornith"), "/context")
    assert shown.returncode == 0, shown
    assumed = window(shown.stdout)
    text = flat(QUICKSTART)
    claim = re.search(rf"{re.escape(version)} assumes ([\d,]+) (?:tokens )?\((?:`/context` shows )?`/ (\w+)`\)( and warns)?",
                      text)
    assert claim and claim.group(2) == assumed, (version, assumed, claim and claim.group(0))
    warning = re.search(r"Claude Code doesn't recognize the model \"ornith\", so it assumes a context window of \S+ "
                        r"tokens\.", shown.stderr)
    assert bool(warning) == bool(claim.group(3)), (version, shown.stderr, claim.group(0))
    if warning:
        assert f"`{warning.group(0)}`" in text and warning.group(0) in flat(TROUBLESHOOTING), warning.group(0)
    readme = flat(ROOT / "README.md")
    assert f"{version} assumes {claim.group(1)}" in readme and (f"{version} assumes {claim.group(1)} and warns" in
                                                               readme) == bool(warning), readme
    # `./build.py claude-code --help` says the same of --context
    helped = subprocess.run([sys.executable, str(ROOT / "build.py"), "claude-code", "--help"], capture_output=True,
                            text=True, timeout=60, env={**os.environ, "COLUMNS": "1000", "TERMINAL_WIDTH": "1000"})
    said = " ".join(re.sub(r"[│╭╮╰╯─]", " ", helped.stdout).split())
    told = re.search(rf"{re.escape(version)}: {claim.group(1)}(?: tokens)?(, with a warning)?[;)]", said)
    assert told and bool(told.group(1)) == bool(warning), (version, said)


@pytest.mark.parametrize("context, shown", [(65536, None), (524288, "524.3k"), (1_000_000, "1m")])
def test_with_the_blocks_settings_no_version_warns_about_the_context(cli, pod, tmp_path, context, shown):
    """At every pod size, the block's settings give Claude Code the pod's window (under 100,000 tokens its
    compaction window cannot go lower than 100,000) and neither the unknown-model warning nor the 200K one."""
    version, binary = cli
    done = claude(binary, environment(tmp_path, pod.url, **dict(settings("ornith", context))), "/context")
    assert done.returncode == 0 and "**Model:** ornith" in done.stdout, done
    assert shown is None or window(done.stdout) == shown, done.stdout
    for warning in ("doesn't recognize the model", "assumes a context window", "isn't enforced"):
        assert warning not in done.stdout + done.stderr, (version, warning, done.stderr)
    # troubleshooting's row for the note 2.1.332 still prints on stderr (the model is not one of Anthropic's)
    note = '[claude-code:unrecognized_model] {"model":"ornith","query_source":"sdk"}'
    answered = claude(binary, environment(tmp_path, pod.url, **dict(settings("ornith", context))), "say hi")
    row = next(line for line in TROUBLESHOOTING.read_text().splitlines() if line.startswith(f"| `{note}`"))
    assert answered.returncode == 0 and (note in answered.stderr) == (f"({version})" in row), (version, answered)


def test_a_model_the_pod_does_not_serve_prints_troubleshootings_text(cli, pod, tmp_path):
    version, binary = cli
    done = claude(binary, environment(tmp_path, pod.url, **dict(settings("ornth", 524288))), "say hi")
    quoted = ("There's an issue with the selected model (ornth). It may not exist or you may not have access to it. "
              "Run --model to pick a different model.")
    assert done.returncode != 0 and quoted in done.stdout, (version, done)
    row = next(line for line in TROUBLESHOOTING.read_text().splitlines() if line.startswith(f"| `{quoted}`"))
    assert version in row


def test_a_request_sent_while_vllm_starts_is_answered_once_it_serves(cli, tmp_path):
    """quickstart step 4: `claude -p` sent during the start waits (held, no error) and prints its answer after it."""
    version, binary = cli
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    try:
        pod.wait_phase("starting", timeout=5)
        env = environment(tmp_path, f"http://127.0.0.1:{pod.port}", **dict(settings("ornith", 1_000_000)))
        asking = subprocess.Popen([binary, "-p", "say hi"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        wait_until(lambda: pod.status()[1]["held_for_start"] >= 1, 60, "Claude Code's request held")
        assert asking.poll() is None
        for step in range(1, 5):
            pod.go(step)
        out, err = asking.communicate(timeout=90)
        assert asking.returncode == 0 and "tok0" in out and "API Error" not in out + err, (version, out, err)
    finally:
        pod.stop()
    assert "`claude -p` prints its answer then" in flat(QUICKSTART)


def test_interactive_claude_code_shows_its_spinner_while_held(cli, tmp_path):
    """quickstart step 4 and troubleshooting: interactive Claude Code started during the start shows its spinner
    (`esc to interrupt`), no error, and the answer once vLLM serves."""
    version, binary = cli
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"hasCompletedOnboarding": True, "theme": "dark",
                                                   "projects": {str(tmp_path): {"hasTrustDialogAccepted": True}}}))
    shell = InteractiveShell({"HOME": str(home), "POD": f"http://127.0.0.1:{pod.port}", "VLLM_API_KEY": KEY,
                              "DISABLE_TELEMETRY": "1", "PATH": f"{os.path.dirname(binary)}:{os.environ['PATH']}"})
    try:
        pod.wait_phase("starting", timeout=5)
        shell.paste(f"cd {tmp_path}\n")
        shell.tmux("set-buffer", "-b", "block", paste_block('"$POD"', "ornith", 1_000_000))
        shell.tmux("paste-buffer", "-d", "-b", "block", "-t", "main")
        shell.wait_for("API Usage Billing")
        shell.tmux("send-keys", "-t", "main", "say hi", "Enter")
        wait_until(lambda: pod.status()[1]["held_for_start"] >= 1, 60, "Claude Code's request held")
        held = shell.wait_for("esc to interrupt")
        assert "API Error" not in held and "retrying" not in held, held
        for step in range(1, 5):
            pod.go(step)
        answered = shell.wait_for("tok0", 90)
        assert "API Error" not in answered, answered
    finally:
        shell.close()
        pod.stop()
    for path in (QUICKSTART, TROUBLESHOOTING):
        assert "spinner" in flat(path) and "`esc to interrupt`" in flat(path), path


def test_a_start_that_outlasts_the_hold_prints_troubleshootings_text(cli, tmp_path):
    """A bridge whose vLLM never serves, holding 2 s (VL_START_HOLD is minutes; the bridge takes seconds), and
    Claude Code without retries: what it prints then is what troubleshooting quotes."""
    version, binary = cli
    bridge = start_bridge(free_port(), wait_ready=False, key=KEY, extra=["--start-hold", "2"])
    try:
        began = time.monotonic()
        done = claude(binary, environment(tmp_path, bridge.url, CLAUDE_CODE_MAX_RETRIES="0",
                                          **dict(settings("ornith", 524288))), "say hi")
    finally:
        bridge.stop()
    quoted = "API Error: 503 model loading: vLLM is still starting on this pod"
    # Claude Code does not show the stream's error event: it retries without streaming, and that retry's 503 is
    # what it prints (docs/bridge.md, "While vLLM starts"), with the hold and where to look
    assert done.returncode != 0 and quoted in done.stdout and time.monotonic() - began > 2, (version, done)
    assert "VL_START_HOLD)" in done.stdout and "GET /prebake/status shows the progress" in done.stdout, (version, done)
    row = next(line for line in TROUBLESHOOTING.read_text().splitlines() if line.startswith(f"| `{quoted}`"))
    assert version in row and "`(held 10 min, VL_START_HOLD)`" in row


UNREACHABLE = {  # how each pod that cannot be reached is made here, and the marker of Claude Code's text for it
    "refused": ("Connection refused", "ConnectionRefused"),
    "unknown name": ("(ENOTFOUND)", "(FailedToOpenSocket)"),
    "RunPod's 502": ("502 Bad Gateway", "502 Bad Gateway"),
}


@pytest.mark.parametrize("problem", UNREACHABLE)
def test_a_pod_that_cannot_be_reached_prints_troubleshootings_text(cli, tmp_path, problem):
    """What Claude Code prints for a refused port, a name that does not resolve and RunPod's 502 page (its
    retries off: they only delay the same text by minutes) is quoted, for its version, on the troubleshooting page."""
    from prebake_testing.runpod_proxy import PullingPod

    version, binary = cli
    if problem == "RunPod's 502":
        with PullingPod() as url:
            done = claude(binary, environment(tmp_path, url, CLAUDE_CODE_MAX_RETRIES="0",
                                              **dict(settings("ornith", 524288))), "say hi")
    else:
        url = f"http://127.0.0.1:{free_port()}" if problem == "refused" else "http://pod-that-is-not.invalid"
        done = claude(binary, environment(tmp_path, url, CLAUDE_CODE_MAX_RETRIES="0",
                                          **dict(settings("ornith", 524288))), "say hi")
    [printed] = [line for line in done.stdout.splitlines() if line.startswith("API Error:")] or [done.stdout]
    assert any(marker in printed for marker in UNREACHABLE[problem]), (version, done)
    host = url.split("//", 1)[1]
    quoted = printed.replace(f"({host})", "(<pod id>-8080.proxy.runpod.net)")
    rows = [line for line in TROUBLESHOOTING.read_text().splitlines() if f"`{quoted}`" in line]
    assert len(rows) == 1, (version, quoted)
    row_text = rows[0].split(f"`{quoted}`", 1)[1].split("|", 1)[0]  # the versions named right after the quote
    assert version in row_text.split(";")[0], (version, quoted, rows[0])
