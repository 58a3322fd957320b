"""The pieces behind the status page, one by one: the redactor, vLLM's log file and its reader, the phase
table, the metrics parser."""

import os

import pytest

from entrypoint.serving import gpus, metrics
from entrypoint.serving.startphase import ORDER, LogPhase, load_phase_lines
from entrypoint.redact import MASK, Redactor
from entrypoint.vllmlog import Follower, LogFile, split_lines

ENV = {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123", "VLLM_API_KEY": "pod-key-123456", "DB_PASSWORD": "hunter2hunter2",
       "VL_MODEL_KEY": "ornith", "SHORT_TOKEN": "abc", "PATH": "/usr/bin"}


@pytest.mark.parametrize("line, kept", [
    ("non-default args: {'model': 'x', 'api_key': ['pod-key-123456'], 'max_num_batched_tokens': 8192}",
     "'max_num_batched_tokens': 8192"),
    ("HfHubHTTPError: 401 for token hf_abcdefghijklmnopqrstuvwxyz123", "401 for token"),
    ("curl -H 'Authorization: Bearer some-unknown-key-42'", "Authorization: Bearer"),
    ("vllm serve x --api-key also-unknown-9 --port 8000", "--port 8000"),
    ("connecting with password=hunter2hunter2", "connecting with"),
    ("downloading with hf_OtherTokenNotInTheEnv12345678", "downloading with"),
    ("HF_TOKEN='sk-proj-abcdefghijklmnop1234'", "HF_TOKEN="),
])
def test_secrets_are_masked_and_the_rest_kept(line, kept):
    clean = Redactor(ENV)(line)
    assert MASK in clean and kept in clean
    for secret in ("pod-key-123456", "hf_abcdefghijklmnopqrstuvwxyz123", "some-unknown-key-42", "also-unknown-9",
                   "hunter2hunter2", "hf_OtherTokenNotInTheEnv12345678", "sk-proj-abcdefghijklmnop1234"):
        assert secret not in clean


@pytest.mark.parametrize("line", [
    "Loading model ornith with max_tokens=64",  # VL_MODEL_KEY is a setting, not a secret
    "Token indices sequence length is longer than the specified maximum",
    "the tokenizer's pad token is None",
    "hf_token: None",
    "GPU KV cache size: 1,234,567 tokens",
    "abc",  # too short to be replaced everywhere
])
def test_ordinary_lines_pass_unchanged(line):
    assert Redactor(ENV)(line) == line


@pytest.mark.parametrize("argv, shown", [
    (["vllm", "--hf-token", "ContainerArgTok000", "--port", "8000"], ["vllm", "--hf-token", MASK, "--port", "8000"]),
    (["--api-key", "k1", "k2", "--max-num-batched-tokens", "8192"], ["--api-key", MASK, MASK,
                                                                      "--max-num-batched-tokens", "8192"]),
    (["--api_key=plainvalue", "--client-secret", "s", "--tokenizer", "t"], ["--api_key=" + MASK, "--client-secret", MASK,
                                                                            "--tokenizer", "t"]),
    (["--model", "https://user:pw@host/x", "--password", "-42"], ["--model", f"https://{MASK}@host/x", "--password",
                                                                   MASK]),
])
def test_an_argv_loses_the_value_of_every_secret_named_option_whatever_it_looks_like(argv, shown):
    assert Redactor({}).argv(argv) == shown


@pytest.mark.parametrize("line", [
    "HF_ENDPOINT=http://user:password@host:8080/x",
    "'[Errno 111] Connection refused' thrown while requesting HEAD https://me:password@hub.example/api",
    "journal: upload to http://password@host/datasets/x failed",
])
def test_the_userinfo_of_any_url_is_masked_and_its_host_kept(line):
    clean = Redactor({})(line)
    assert "password" not in clean and f"{MASK}@h" in clean


def test_split_lines_keeps_carriage_returns_and_the_rest():
    assert split_lines(b"a\nb\rc") == ([b"a\n", b"b\r"], b"c")
    assert split_lines(b"") == ([], b"")


def test_the_log_file_rotates_and_the_reader_follows(tmp_path):
    path = str(tmp_path / "run" / "vllm.log")
    notes = []
    log = LogFile(path, notes.append, max_bytes=100, backups=2)
    reader = Follower(path)
    log.write(b"first line\n")
    assert list(reader.lines()) == ["first line"]
    seen = []
    for number in range(12):
        log.write(f"line {number:02d} {'x' * 20}\n".encode())
        if number % 2:  # at most one rotation between two reads, as with 16 MiB files read every half second
            seen += reader.lines()
    assert seen == [f"line {number:02d} {'x' * 20}" for number in range(12)]  # nothing lost across rotations
    assert os.path.getsize(path) <= 100 and os.path.exists(path + ".2") and not os.path.exists(path + ".3")
    log.close()
    # A new run keeps the previous run's log as vllm.log.1; a line is read once whole.
    log = LogFile(path, notes.append)
    assert open(path + ".1").read().endswith("line 11 " + "x" * 20 + "\n") and os.path.getsize(path) == 0
    reader = Follower(path)
    log.write(b"partial")
    assert list(reader.lines()) == []
    log.write(b" then whole\n")
    assert list(reader.lines()) == ["partial then whole"]
    assert notes == []


def test_an_unwritable_log_folder_turns_the_file_off_not_the_pod(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    notes = []
    log = LogFile(str(blocker / "vllm.log"), notes.append)
    log.write(b"still fine\n")
    assert notes and "vLLM's output still reaches the container log" in notes[0]


def test_every_phase_of_the_table_is_known_and_ordered():
    markers = load_phase_lines()
    assert {m.phase for m in markers} <= set(ORDER) and "serving" not in {m.phase for m in markers}
    tracker = LogPhase(markers)
    seen = []
    for marker in markers:
        tracker.feed(f"(EngineCore pid=1) INFO [x.py:1] {marker.text} ...")
        # each line is recognised as its own row's phase (no earlier row's text shadows it)
        assert tracker.phase == marker.phase, marker.text
        seen.append(tracker.phase)
    # the table lists vLLM's lines in the order vLLM prints them: phases never go back
    assert seen == sorted(seen, key=ORDER.index)


def test_metrics_sum_engines_and_rate_counters():
    page = ('vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
            'vllm:num_requests_running{engine="1",model_name="m"} 1.0\n'
            'vllm:num_requests_waiting{engine="0",model_name="m"} 4.0\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
            'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.9\n'
            'vllm:prompt_tokens_total{engine="0",model_name="m"} 100.0\n'
            'vllm:generation_tokens_total{engine="0",model_name="m"} 10.0\n'
            'vllm:prompt_tokens_created{engine="0",model_name="m"} 1.7e9\n')
    first = metrics.sample(page, 0.0)
    later = metrics.sample(page.replace("} 100.0", "} 1100.0").replace("} 10.0", "} 60.0"), 10.0)
    figures = metrics.figures(later, first)
    assert figures == {"running": 3, "waiting": 4, "kv_cache_usage_percent": 90.0, "prompt_tokens_per_s": 100.0,
                       "generation_tokens_per_s": 5.0, "over_s": 10.0, "preemptions": 0}
    restarted = metrics.sample(page.replace("} 100.0", "} 5.0"), 20.0)
    assert metrics.figures(restarted, later)["prompt_tokens_per_s"] is None
    assert metrics.sample("# not vLLM\nfoo 1\n", 0.0) is None


def test_gpu_memory_lines():
    assert gpus.parse("0, NVIDIA H200, 1024, 143771\n1, NVIDIA H200, 0, 143771\nbad line\n") == [
        {"index": 0, "name": "NVIDIA H200", "memory_used_mib": 1024, "memory_total_mib": 143771},
        {"index": 1, "name": "NVIDIA H200", "memory_used_mib": 0, "memory_total_mib": 143771}]


def test_the_page_phase_from_the_run_state(tmp_path):
    from entrypoint import contract
    from entrypoint.launcher import runstate
    from entrypoint.serving.monitor import Monitor
    from entrypoint.serving.status import snapshot

    state = tmp_path / "state.json"
    state.write_text('{"identity": {"variant": "a40"}, "started_at": 0, "vllm": {"starts": [1], "pid": 7, "exit": null}}')
    monitor = Monitor({contract.RUN_DIR_VARIABLE: str(tmp_path)}, "http://127.0.0.1:1", print)
    assert monitor.phase() == ("starting", "vLLM is starting: reading its configuration and the model's, spawning its engine")
    runstate.update_vllm(str(state), pid=None, exit={"code": 3, "at": 2, "why": "vLLM exited with code 3"})
    monitor.refresh_state()
    assert monitor.phase() == ("failed", "vLLM exited with code 3")
    runstate.mark_swapping(str(state), "qwen")
    monitor.refresh_state()
    assert monitor.phase()[0] == "swapping"  # the old vLLM's exit is part of the swap
    public = snapshot(monitor, full=False)
    assert public["image"] == {"variant": "a40"} and "log" not in public and "decisions" not in public


def test_a_librarys_log_records_go_through_the_bridges_cleaner_too():
    # huggingface_hub's retry warnings (the journal's uploads) name HF_ENDPOINT, password and all.
    import subprocess
    import sys

    code = ("import logging, logging.config\n"
            "from entrypoint.logline import escape_controls, logging_config, set_cleaner\n"
            "from entrypoint.redact import Redactor\n"
            "logging.config.dictConfig(logging_config('prebake-bridge'))\n"
            "set_cleaner(lambda text: escape_controls(Redactor({})(text)))\n"
            "import huggingface_hub  # imported late, as the journal's upload does: it adds a handler of its own\n"
            "logging.getLogger('huggingface_hub.utils._http').warning(\"'[Errno 111]' thrown while requesting "
            "HEAD http://user:%s@127.0.0.1:9/api\\r\\nforged\", 'pa55word')\n"
            "logging.getLogger('uvicorn.error').warning('uvicorn: http://u:pa55word@h/')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert "pa55word" not in done.stderr, done.stderr
    assert "http://[redacted]@127.0.0.1:9/api\\x0d\\x0aforged" in done.stderr, done.stderr
    assert "[prebake-bridge] WARNING uvicorn: http://[redacted]@h/" in done.stderr


def test_the_page_redacts_option_value_pairs_of_a_state_written_without_it(tmp_path):
    from entrypoint import contract
    from entrypoint.serving.monitor import Monitor
    from entrypoint.serving.status import snapshot

    (tmp_path / "state.json").write_text('{"argv": ["vllm", "serve", "m", "--hf-token", "ContainerArgTok000", '
                                         '"--max-num-seqs", "4"], "vllm": {"starts": [1], "pid": 7, "exit": null}}')
    monitor = Monitor({contract.RUN_DIR_VARIABLE: str(tmp_path)}, "http://127.0.0.1:1", print)
    assert snapshot(monitor, full=True)["vllm"]["argv"] == ["vllm", "serve", "m", "--hf-token", MASK,
                                                            "--max-num-seqs", "4"]


@pytest.mark.parametrize("line", [
    # vLLM's argv as a list, and its non-default arguments as a dict (api_utils.log_non_default_args)
    "argv ['vllm', 'serve', 'm', '--hf-token', 'Tok en0', '--api-key', 'KeyOne1', 'KeyTwo2', '--max-num-seqs', '4']",
    "non-default args: {'model': 'm', 'hf_token': 'Tok en0', 'api_key': ['KeyOne1', 'KeyTwo2'], 'max_num_seqs': 4}",
    '["--hf-token", "Tok en0", "--api-key", "KeyOne1", "KeyTwo2", "--max-num-seqs", "4"]',
    "{'hf_token': b'Tok en0', 'api_key': ('KeyOne1', \"KeyTwo2\"), 'max_num_seqs': 4}",
    "('--client-secret', 'Tok en0', '--password', 'KeyOne1', '--token=KeyTwo2', '--max-num-seqs', '4')",
])
def test_secret_options_are_masked_in_the_reprs_vllm_logs(line):
    clean = Redactor({})(line)
    assert all(secret not in clean for secret in ("Tok", "en0", "KeyOne1", "KeyTwo2")), clean
    assert "max" in clean and "4" in clean and ("'m'" in clean or "4" in clean)


@pytest.mark.parametrize("line", ["{'api_key': None, 'hf_token': None}", "{'api_key': [], 'tokenizer': 'Qwen/Qwen3'}",
                                  "['--tokenizer', 'Qwen/Qwen3', '--max-num-batched-tokens', '8192']"])
def test_reprs_without_a_secret_pass_unchanged(line):
    assert Redactor({})(line) == line
