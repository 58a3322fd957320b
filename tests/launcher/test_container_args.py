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


# --- one reading of the container arguments, one port rule ---------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("8080", 8080), ("1", 1), ("65535", 65535), ("0", None), ("65536", None), ("99999", None), ("²", None),
    ("٣", None), ("1_0", None), (" 80", None), ("+80", None), ("", None), (None, None), ("0080", 80),
])
def test_one_port_rule_for_every_reader(text, expected):
    from entrypoint.contract import port_number
    from entrypoint.launcher.knobs import BadValue, port

    assert port_number(text) == expected
    if expected is None and text is not None:  # VL_PORT, VL_PROXY_PORT, VL_INTERNAL_PORT: the same rule
        with pytest.raises(BadValue):
            port(text)


@pytest.mark.parametrize("args", [["--port", "²"], ["--port=٣"], ["--port", "99999"], ["--port", "0"]])
def test_a_port_that_is_no_port_is_refused_with_the_bridge_on_and_off(launcher, args):
    for bridge in ("keepalive", "off"):
        result = launcher.run("h200_580", env={"VL_BRIDGE": bridge}, args=args)
        assert result.rc == 2 and "is not a port" in result.stderr and "launcher bug" not in result.stderr


def test_a_unicode_digit_as_prefill_context_parallelism_is_not_a_launcher_bug(launcher):
    # "²".isdigit() is True and int("²") raises: the runner's check read it so (a launcher bug, exit 1)
    result = launcher.run("h200_580", args=["--prefill-context-parallel-size", "²"])
    assert result.rc == 0 and "launcher bug" not in result.stderr


def test_the_container_arguments_are_one_value_every_decision_reads():
    from entrypoint.launcher.cmdline import ContainerArgs

    args = ContainerArgs.of(["--port", "9000", "--max_model_len=32768", "--host", "::", "--port=9001",
                             "--api-key", "a", "b", "--max-num-seqs", "4"])
    assert args.port == 9001 and args.last("host") == "::" and args.max_model_len == 32768
    assert args.values("port") == ["9000", "9001"] and args.keys == ["port", "max-model-len", "host", "port",
                                                                     "api-key", "max-num-seqs"]
    assert ContainerArgs.of(["--max-model-len", "32k"]).max_model_len is None  # vLLM reads it; not a number here


def test_the_swap_set_tells_the_bridge_the_context_a_container_argument_sets(launcher):
    from entrypoint.contract import SwapConfig
    from entrypoint.launcher.main import make_launch

    env = dict(launcher.base_env("h200_580"), VL_SWAP="qwen:qwen,dense:dense")
    plans = {args: make_launch(env, list(args)) for args in [(), ("--max-model-len", "40000"), ("--max_model_len=32k",)]}
    told = {args: SwapConfig.from_json(plan.swap.for_bridge().to_json()) for args, plan in plans.items()}
    launchers = [model.plan.max_model_len for model in plans[()].swap.models]
    assert all(isinstance(size, int) and size > 40000 for size in launchers)  # the launcher's own sizing
    assert [target.max_model_len for target in told[()].models] == launchers
    assert [target.max_model_len for target in told[("--max-model-len", "40000")].models] == [40000] * 3
    assert [target.max_model_len for target in told[("--max_model_len=32k",)].models] == [None] * 3  # not a number
    assert [target.repo for target in told[()].models] == [model.plan.argv[2] for model in plans[()].swap.models]
