"""Container arguments are appended; where one repeats a launcher flag, the user's value wins, once."""

import pytest

from entrypoint.launcher.cmdline import option_key


@pytest.mark.parametrize("args,flag,expected", [
    (["--max-model-len", "4096"], "--max-model-len", ["4096"]),
    (["--max-num-seqs", "8", "--port", "9000"], "--port", ["9000"]),
    (["--served-model-name", "a", "b"], "--served-model-name", ["a", "b"]),
])
def test_user_value_wins_and_flag_appears_once(launcher, args, flag, expected):
    result = launcher.plan("h200_580", args=args)
    assert result.option(flag) == expected  # option() fails if the flag appears twice
    assert result.argv[-len(args):] == args  # appended verbatim, at the end


def test_other_spellings_replace_the_launcher_flag(launcher):
    result = launcher.plan("h200_580", args=["--max_model_len=4096", "--no-enable-prefix-caching", "-tp", "1"])
    assert "--max-model-len" not in result.argv and "--enable-prefix-caching" not in result.argv
    assert "--tensor-parallel-size" not in result.argv
    assert result.argv[-4:] == ["--max_model_len=4096", "--no-enable-prefix-caching", "-tp", "1"]
    overridden = result.decision("container-arguments")[0]["decision"]
    assert "--max-model-len" in overridden and "--enable-prefix-caching" in overridden


def test_user_speculation_turns_async_scheduling_off(launcher):
    result = launcher.plan("h200_580", args=["--speculative-config", '{"method":"ngram","num_speculative_tokens":4}'])
    assert "--async-scheduling" not in result.argv


@pytest.mark.parametrize("args,needle", [
    (["Qwen/Qwen3-8B"], "VL_MODEL"),
    (["--model", "Qwen/Qwen3-8B"], "VL_MODEL"),
])
def test_model_in_container_arguments_is_refused(launcher, args, needle):
    result = launcher.run("h200_580", args=args)
    assert result.rc == 2 and needle in result.stderr


def test_option_key_spellings():
    assert option_key("--max-model-len") == option_key("--max_model_len=5") == "max-model-len"
    assert option_key("--no-async-scheduling") == "async-scheduling"
    assert option_key("-tp") == "tensor-parallel-size"
    assert option_key("-1") is None and option_key('{"video":0}') is None
