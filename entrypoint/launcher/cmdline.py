"""The `vllm serve` option list, and how container arguments are merged into it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ..contract import port_number
from ..vllmoptions import ONE_VALUE, SEVERAL_VALUES, SWITCHES, ServeArgs, max_model_len, name_of  # noqa: F401
from .report import LaunchError


@dataclass(frozen=True)
class Option:
    flag: str  # "--max-model-len"
    values: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [self.flag, *self.values]


def option_key(token: str) -> str | None:
    """The option a token names, in one spelling (vllmoptions.name_of): --max_model_len, --max-model-len=4, -tp and
    --no-enable-prefix-caching name max-model-len, tensor-parallel-size and enable-prefix-caching."""
    return name_of(token)


# options whose dotted keys vLLM would turn into a JSON text where it wants a plain value: refused by name
NOT_JSON = frozenset({"api-key", "host", "port"})
# a long option in lower case; a JSON option's dotted keys (--speculative-config.method) are the JSON's, any case
_LONG_OPTION = re.compile(r"--[a-z0-9][a-z0-9_-]*(\.[^=]*)?(=.*)?", re.DOTALL)


def _not_an_option(token: str) -> LaunchError:
    return LaunchError(
        subject="container arguments", value=token, problem=f"container argument {token!r} is not an option",
        fix="the model is chosen with VL_MODEL (container arguments are options appended to `vllm serve`, e.g. "
            "--max-num-seqs 32).")


def api_key_lacks_value() -> LaunchError:
    return LaunchError(subject="--api-key", value="", problem="container argument --api-key has no value",
                       fix="give the key after it, or leave it out and set VLLM_API_KEY (a RunPod secret keeps it "
                           "out of the template).")


def _lacks_value(token: str, following: str | None) -> LaunchError:
    if option_key(token) == "api-key":
        return api_key_lacks_value()  # a key, not a number: say where a key can come from instead
    after = f"followed by {following!r}" if following is not None else "last"
    return LaunchError(subject=token, value=None, problem=f"container argument {token} needs a value but comes {after}",
                       fix=f"give it one ({token} VALUE), or leave it out.")


def _check_port(token: str, value: str | None) -> None:
    if port_number(value) is None:
        raise LaunchError(subject=token, value=value, problem=f"container argument {token} {value!r} is not a port",
                          fix="accepted values are 1-65535 (or leave --port out and set VL_PORT).")


def user_option_keys(user_args: list[str]) -> list[str]:
    """Keys of the options in the container arguments, in order, read as vLLM's parser reads them (vllmoptions),
    refusing what would bypass the launcher or what vLLM's parser would refuse only after the launcher has handed
    over."""
    tokens, keys = list(user_args), []
    for item in ServeArgs.of(tokens).items:
        if isinstance(item, str):
            raise _not_an_option(item)  # a positional argument: vLLM would take it for a model
        token = tokens[item.start]
        written = token.split("=", 1)[0]
        if item.name.lower() == "model":
            raise LaunchError(subject=written, value=token, problem=f"container argument {written} is not accepted",
                              fix="set VL_MODEL (a catalogue key or a Hugging Face repo id) so that the launcher "
                                  "sizes the context for it.")
        if item.key and item.name in NOT_JSON:
            plain = item.flag.split('.')[0]
            raise LaunchError(subject=written, value=token, problem=f"container argument {written} is not accepted",
                              fix=f"{plain} takes a plain value, which vLLM would read as the JSON "
                                  f"{{\"{item.key}\": ...}} (give {plain} VALUE).")
        if token.startswith("--") and not _LONG_OPTION.fullmatch(token):
            raise LaunchError(subject="container arguments", value=token,
                              problem=f"container argument {token!r} is not a vLLM option",
                              fix="vLLM's options are lower case, e.g. --max-num-seqs.")
        if item.name == "port" and not item.negated:
            _check_port(written, item.values[0] if item.values else None)
        if not item.values and not item.negated and item.name in ONE_VALUE | SEVERAL_VALUES:
            raise _lacks_value(token, tokens[item.end] if item.end < len(tokens) else None)
        keys.append(item.name)
    return keys


def merge(launcher: list[Option], args: ContainerArgs) -> tuple[list[str], list[str]]:
    """Launcher options, minus those the user repeats, then the user's arguments verbatim.

    Returns (argv tail, keys overridden by the user)."""
    user_keys = set(args.keys)
    kept, overridden = [], []
    for option in launcher:
        stray = [value for value in option.values if option_key(value) is not None]
        if stray:  # every knob's parser should have refused it: a last guard against injection
            raise LaunchError(subject=option.flag, value=stray[0],
                              problem=f"the value {stray[0]!r} of {option.flag} would read as an option of vLLM",
                              fix="check the VL_* variable that sets it (values never start with '-').")
        key = option_key(option.flag)
        if key in user_keys:
            overridden.append(key)
        else:
            kept.extend(option.argv())
    return kept + list(args.tokens), overridden


def option_spans(argv: list[str] | tuple[str, ...], key: str) -> list[tuple[int, int]]:
    """(start, end) of each occurrence of option `key` in argv with its values, as vLLM's parser reads them
    (--key=v alone; --api-key's one value or more)."""
    return ServeArgs.of(argv).spans(key)


@dataclass(frozen=True)
class ContainerArgs:
    """The container's arguments, read once: every decision about them asks this value.

    `tokens` go to `vllm serve` verbatim, after the launcher's options; `keys` checks them (the first
    read of it refuses what vLLM would refuse only after the launcher handed over)."""
    tokens: tuple[str, ...]

    @classmethod
    def of(cls, user_args: list[str] | tuple[str, ...]) -> ContainerArgs:
        return cls(tuple(user_args))

    @cached_property
    def keys(self) -> list[str]:
        """The options' keys, in order; LaunchError for an argument the launcher refuses."""
        return user_option_keys(list(self.tokens))

    @cached_property
    def parsed(self) -> ServeArgs:
        return ServeArgs.of(self.tokens)

    def values(self, key: str) -> list[str]:
        """The value each occurrence gives option `key` (--key v or --key=v, in any spelling vLLM reads), in order."""
        return self.parsed.values(key)

    def last(self, key: str) -> str | None:
        """The value vLLM's parser keeps: the last occurrence's, or None."""
        values = self.values(key)
        return values[-1] if values else None

    @property
    def speculative_config(self) -> str | None:
        """The speculation the arguments configure, in any spelling (vllmoptions: --speculative-config, -sc, -s,
        their dotted keys, --spec-method ...), as the JSON vLLM builds; None without any."""
        return self.parsed.speculative_config

    @property
    def port(self) -> int | None:
        """--port, checked by the port rule (LaunchError when it is not a port), or None."""
        value = self.last("port")
        if value is None:
            return None
        if port_number(value) is None:
            raise LaunchError(subject="--port", value=value,
                              problem=f"container argument --port {value!r} is not a port number", fix="give 1-65535.")
        return port_number(value)

    @property
    def max_model_len(self) -> int | None:
        """--max-model-len as a number of tokens when it is given as one (vLLM also reads "32k"), else None."""
        return max_model_len(self.tokens)
