"""One model of vLLM's arguments (entrypoint/vllmoptions.py): every reader of an argv asks it, so spellings that
vLLM's parser reads alike give one plan and one compile-cache key. That the model reads as vLLM's own parser does
is checked in the image (tests/integration/prebuilt/test_vllm_options_image.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from entrypoint.claudecode import _context
from entrypoint.contract import root_path_of
from entrypoint.launcher.cmdline import ContainerArgs, option_key, option_spans
from entrypoint.launcher.compilecache import keyed_argv
from entrypoint.launcher.supervise import port_of
from entrypoint.modelnames import served_names
from entrypoint.vllmoptions import Option, ServeArgs, name_of
from prebake_testing.hosts import Launcher

UNDERSCORES = "--max_model_len=8192 --served_model_name foo bar --port=9000 --root_path=/api --max_num_seqs=32".split()
DASHES = "--max-model-len 8192 --served-model-name foo bar --port 9000 --root-path /api --max-num-seqs 32".split()


def test_the_issues_two_spellings_give_one_plan_and_one_compile_cache_key(tmp_path):
    launcher = Launcher(tmp_path)
    plans = [launcher.plan("h200_580", env={"VL_CACHE_REPO": "me/compile-cache"}, args=args).plan
             for args in (UNDERSCORES, DASHES)]
    keys = [plan["compile_cache"]["key"] for plan in plans]
    assert keys[0] == keys[1]
    assert plans[0]["compile_cache"]["facts"] == plans[1]["compile_cache"]["facts"]
    assert plans[0]["bridge"] == plans[1]["bridge"] and plans[0]["bridge"]["vllm_port"] == 9000
    decisions = [[d for d in plan["decisions"] if d["topic"] not in ("compile-cache",)] for plan in plans]
    assert decisions[0] == decisions[1]
    overridden = next(d["decision"] for d in decisions[0] if d["topic"] == "container-arguments")
    assert overridden == "override --served-model-name --port --max-num-seqs --max-model-len"
    # and every reader of the argv reads both alike
    for plan in plans:
        argv = plan["argv"]
        assert served_names(argv) == ("foo", "bar")
        assert root_path_of(argv) == "/api" and port_of(tuple(argv)) == 9000 and _context(argv) == 8192
    other = launcher.plan("h200_580", env={"VL_CACHE_REPO": "me/compile-cache"},
                          args=[*DASHES[:-1], "16"]).plan["compile_cache"]["key"]
    assert other != keys[0], "a value vLLM compiles for still changes the key"


@pytest.mark.parametrize("spelling", [
    ["-tp", "2"], ["--tensor_parallel_size=2"], ["--tensor-parallel", "2"], ["--tensor-parallel-size", "2"]])
def test_short_underscored_and_abbreviated_spellings_are_one_option(spelling):
    [option] = ServeArgs.of(spelling).options
    assert (option.name, option.values, option.known) == ("tensor-parallel-size", ("2",), True)
    assert keyed_argv(spelling) == ["--tensor-parallel-size", "2"]


def test_the_model_reads_values_as_argparse_counts_them():
    args = ServeArgs.of(["vllm", "serve", "m", "-O3", "--no-enable-prefix-caching", "--compilation-config.level",
                         "3", "--api-key", "a", "b", "--temperature", "-5", "--enforce_eager", "x"])
    assert args.model == "m" and args.positionals == ("vllm", "serve", "m", "x")
    assert [(o.flag, o.values) for o in args.options] == [
        ("--optimization-level", ("3",)), ("--no-enable-prefix-caching", ()), ("--compilation-config.level", ("3",)),
        ("--api-key", ("a", "b")), ("--temperature", ("-5",)), ("--enforce-eager", ())]
    assert not args.options[4].known  # vLLM's serve has no --temperature: kept, with what follows it
    assert args.spans("api-key") == [(7, 10)] and args.value("optimization-level") == "3"
    # a switch takes no value: what follows is a positional, as vLLM reads it (and the launcher refuses); a dotted
    # key goes last, as the JSON vLLM makes of it
    assert args.canonical() == ["vllm", "serve", "m", "--optimization-level", "3", "--no-enable-prefix-caching",
                                "--api-key", "a", "b", "--temperature", "-5", "--enforce-eager", "x",
                                "--compilation-config", '{"level":3}']


def test_the_last_occurrence_wins_and_the_no_form_is_not_a_value():
    argv = ["--port", "1", "--port=2", "--served-model-name", "a", "--served_model_name=b"]
    assert port_of(tuple(argv)) == 2 and served_names(["vllm", "serve", "m", *argv]) == ("b",)
    assert served_names(["vllm", "serve", "m"]) == ("m",) and served_names([]) == ()
    assert option_spans(["--no-trust-remote-code", "--trust_remote_code"], "trust-remote-code") == [(1, 2)]
    assert ContainerArgs.of(["-pcp", "2"]).values("prefill-context-parallel-size") == ["2"]


@pytest.mark.parametrize("token, name", [
    ("--max_model_len=3", "max-model-len"), ("-dp", "data-parallel-size"),
    ("--no-async-scheduling", "async-scheduling"),
    ("-O2", "optimization-level"), ("--not_vllms", "not-vllms"), ("-5", None), ("-.5", None), ("--", None),
    ("value", None), ("-x y", None)])
def test_a_token_names_its_option_in_one_spelling(token, name):
    assert name_of(token) == option_key(token) == name


def test_an_ambiguous_abbreviation_names_no_option_of_vllms():
    [option] = ServeArgs.of(["--enable-p", "x"]).options  # --enable-prefix-caching, --enable-prompt-embeds, ...
    assert option == Option("enable-p", ("x",), 0, 2, known=False)


def test_each_knob_names_its_flag_once_and_it_is_an_option_of_vllms():
    from entrypoint.launcher.knobs import KNOBS, flag_of

    flags = {knob.name: knob.flag for knob in KNOBS if knob.flag}
    assert flags["VL_CTX"] == flag_of("VL_CTX") == "--max-model-len" and len(flags) > 20
    for name, flag in flags.items():
        [option] = ServeArgs.of([flag]).options
        assert option.known and option.flag == flag, f"{name}: {flag} is not how vLLM spells one of its options"
        knob = next(k for k in KNOBS if k.name == name)
        assert "{flag}" in knob.about and flag in knob.meaning and flag not in knob.about, name
    with pytest.raises(KeyError, match="VL_MODEL sets no option"):
        flag_of("VL_MODEL")


def test_the_plan_writes_a_knobs_flag_as_the_knob_names_it(tmp_path):
    plan = Launcher(tmp_path).plan("h200_580", env={"VL_SEQS": "17", "VL_OPT": "1", "VL_BATCHED": "4096"}).plan
    args = ServeArgs.of(plan["argv"])
    assert (args.value("max-num-seqs"), args.value("optimization-level"), args.value("max-num-batched-tokens")) \
        == ("17", "1", "4096")


def test_a_catalogue_flag_read_from_a_knob_is_the_knobs_flag(tmp_path):
    from entrypoint.launcher.catalogue import load_catalogue
    from entrypoint.launcher.report import LaunchError

    text = (Path(__file__).resolve().parents[2] / "entrypoint" / "models.toml").read_text()
    path = tmp_path / "models.toml"
    path.write_text(text.replace('flag = "--mamba-backend"', 'flag = "--mamba-backends"'))
    with pytest.raises(LaunchError, match=r"has flag --mamba-backends read from VL_MAMBA_BACKEND, which sets "
                                          r"--mamba-backend \(knobs.py\)"):
        load_catalogue(str(path))


@pytest.mark.parametrize("arguments, refused", [
    (["--max_num_seqs=8", "x"], "container argument 'x' is not an option"),
    (["--max-num-seq", "--enforce-eager"], "container argument --max-num-seq needs a value but comes followed by "
                                           "'--enforce-eager'"),
    (["--por", "80x"], "container argument --por '80x' is not a port"),
    (["--MODEL", "evil/model"], "container argument --MODEL is not accepted: set VL_MODEL"),
    (["--enforce-eager", "--", "x"], "container argument '--' is not an option"),
])
def test_the_container_arguments_are_checked_as_vllm_reads_them(arguments, refused):
    """An abbreviation is the option it abbreviates (argparse's allow_abbrev), for the checks too."""
    from entrypoint.launcher.report import LaunchError

    with pytest.raises(LaunchError, match=re.escape(refused)):
        ContainerArgs.of(arguments).keys
    assert ContainerArgs.of(["--max-num-seq", "8", "-O3", "-tp=2"]).keys == [
        "max-num-seqs", "optimization-level", "tensor-parallel-size"]


# --- hostile round 6 (issue 56): every spelling vLLM 0.27.1's parser reads (checked in the image:
# tests/integration/prebuilt/test_vllm_options_image.py) -------------------------------------------------------------------

@pytest.mark.parametrize("spelling, name, values", [
    (["-t", "1"], "tensor-parallel-size", ("1",)),  # argparse abbreviates short options too: -t is -tp
    (["-s", "{}"], "speculative-config", ("{}",)), (["-pc", "2"], "prefill-context-parallel-size", ("2",)),
    (["-c", "{}"], "compilation-config", ("{}",)), (["-as", "2"], "api-server-count", ("2",)),
    (["-e"], "enable-expert-parallel", ()),
    (["-qfp8"], "quantization", ("fp8",)), (["-n2"], "nnodes", ("2",)), (["-r1"], "node-rank", ("1",)),
    (["-q=fp8"], "quantization", ("fp8",)),
])
def test_single_dash_abbreviations_and_attached_values(spelling, name, values):
    [option] = ServeArgs.of(spelling).options
    assert (option.name, option.values, option.known) == (name, values, True)


def test_an_ambiguous_or_unknown_short_option_is_not_vllms():
    [option] = ServeArgs.of(["-d", "2"]).options  # -dp, -dc, -dcp...: argparse refuses it
    assert not option.known
    assert not ServeArgs.of(["-s=x"]).options[0].known  # "=" after an abbreviation: argparse has no such option


def test_dotted_keys_become_the_json_vllm_makes_of_them():
    args = ServeArgs.of(["-sc.method", "dspark", "--served-model-name", "a", "-sc.model", "x/y", "b",
                         "--compilation_config.mode=3", "-cc.custom_ops+", "none,+rms_norm", "--hf-overrides.a.b", "2k"])
    assert args.values("speculative-config") == ['{"method": "dspark", "model": "x/y"}']
    assert served_names(["vllm", "serve", "m", *args.tokens]) == ("a", "b")  # vLLM takes the keys out first
    assert args.values("compilation-config") == ['{"mode": 3}', '{"custom_ops": ["none", "+rms_norm"]}']
    assert args.value("compilation-config") == '{"custom_ops": ["none", "+rms_norm"]}'  # -cc apart, and last
    assert json.loads(args.value("hf-overrides")) == {"a": {"b": 2000}}
    assert args.spans("speculative-config") == [(0, 2), (4, 6)]
    # a JSON written whole, then dotted keys: vLLM appends the keys' JSON, which argparse reads last
    assert ServeArgs.of(["--speculative-config.method", "ngram", "-sc", '{"method": "dspark"}']).value(
        "speculative-config") == '{"method": "ngram"}'


SPECULATION = '{"method":"dspark","model":"x/y"}'


@pytest.mark.parametrize("spelling", [
    ["-s", SPECULATION], ["-sc.method", "dspark", "-sc.model", "x/y"], ["--speculative_config", SPECULATION],
    ["--speculative-config.method", "dspark", "--speculative-config.model", "x/y"], ["--speculative-c", SPECULATION],
    ["--spec-method", "dspark", "--spec-model", "x/y"],  # vLLM's shorthands for the config's keys
])
def test_one_speculation_in_any_spelling_gives_one_plan(tmp_path, spelling):
    """The same speculation written six ways: one plan (the runner left to vLLM, no thinking budgets, no async
    scheduling), as for `-sc JSON`; `--speculative-config.method` is vLLM's documented form, not refused."""
    launcher = Launcher(tmp_path)
    expected = launcher.plan("h200_580", args=["-sc", SPECULATION]).plan
    plan = launcher.plan("h200_580", args=spelling).plan
    assert plan["decisions"] == expected["decisions"] and plan["env"] == expected["env"]
    topics = {d["topic"]: d["decision"] for d in plan["decisions"]}
    assert topics["model-runner"] == "V2 (vLLM's choice)" and topics["async-scheduling"] == "off"


def test_a_value_nested_too_deep_is_read_as_text_not_a_recursion_error():
    deep = "[" * 100_000
    args = ServeArgs.of(["--hf-overrides.x", deep, "-sc", deep, "--spec-tokens", "2"])
    assert json.loads(args.value("hf-overrides")) == {"x": deep}
    assert json.loads(args.speculative_config) == {"num_speculative_tokens": 2} and args.canonical()
