"""The `vllm serve` option list, and how container arguments are merged into it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ..contract import port_number
from ..vllm_facts import SERVE_OPTIONS
from ..vllmoptions import ServeArgs, max_model_len, name_of
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


# How many values each option of vLLM's serve parser takes (entrypoint/vllm_facts.json, generated from the image's
# vLLM), to tell a value from a stray positional argument (a model name) after it: switches are argparse
# BooleanOptionalAction / store_true (no value), nargs "+" takes one or more; an option vLLM does not have, or one
# whose value is optional ("?", "*"), takes any number.
SWITCHES = frozenset(name for name, nargs in SERVE_OPTIONS.items() if nargs == 0)
SEVERAL_VALUES = frozenset(name for name, nargs in SERVE_OPTIONS.items() if nargs == "+")
ONE_VALUE = frozenset(name for name, nargs in SERVE_OPTIONS.items() if nargs == 1)
_LONG_OPTION = re.compile(r"--[a-z0-9][a-z0-9_-]*(=.*)?", re.DOTALL)


def _not_an_option(token: str) -> LaunchError:
    return LaunchError(
        f"container argument {token!r} is not an option: the model is chosen with VL_MODEL (container "
        "arguments are options appended to `vllm serve`, e.g. --max-num-seqs 32).")


def api_key_lacks_value() -> LaunchError:
    return LaunchError("container argument --api-key has no value: give the key after it, or leave it out and set "
                       "VLLM_API_KEY (a RunPod secret keeps it out of the template).")


def _lacks_value(token: str, following: str | None) -> LaunchError:
    if option_key(token) == "api-key":
        return api_key_lacks_value()  # a key, not a number: say where a key can come from instead
    after = f"followed by {following!r}" if following is not None else "last"
    return LaunchError(f"container argument {token} needs a value but comes {after}: give it one ({token} VALUE), "
                       "or leave it out.")


def _check_port(token: str, value: str | None) -> None:
    if port_number(value) is None:
        raise LaunchError(f"container argument {token} {value!r} is not a port: accepted values are 1-65535 "
                          "(or leave --port out and set VL_PORT).")


def user_option_keys(user_args: list[str]) -> list[str]:
    """Keys of the options in the container arguments, refusing what would bypass the launcher
    or what vLLM's parser would refuse only after the launcher has handed over."""
    keys = []
    values_left: int | None = 0  # values the previous option still takes; None = unknown (any)
    port_flag = None  # a --port still waiting for its value
    needs_value = None  # an option that takes one value and has not had it yet
    for position, token in enumerate(user_args):
        key = option_key(token)
        if key is not None and needs_value is not None and port_flag is None:
            raise _lacks_value(needs_value, token)
        needs_value = None
        if key is None:
            if position == 0 or values_left == 0:
                raise _not_an_option(token)  # a positional argument: vLLM would take it for a model
            if values_left is not None:
                values_left -= 1
            if port_flag is not None:
                _check_port(port_flag, token)
                port_flag = None
            continue
        if port_flag is not None:
            _check_port(port_flag, None)  # --port followed by another option
        if key.lower().replace("_", "-") == "model":
            raise LaunchError(f"container argument {token.split('=', 1)[0]} is not accepted: set VL_MODEL (a "
                              "catalogue key or a Hugging Face repo id) so that the launcher sizes the context for it.")
        if token.startswith("--") and not _LONG_OPTION.fullmatch(token):
            raise LaunchError(f"container argument {token!r} is not a vLLM option: vLLM's options are lower "
                              "case, e.g. --max-num-seqs.")
        if "=" in token:
            values_left = 0
            if key == "port":
                _check_port(token.split("=", 1)[0], token.split("=", 1)[1])
        elif token.startswith("--no-") or key in SWITCHES:
            values_left = 0
        elif key in SEVERAL_VALUES:
            values_left = None
            needs_value = token
        elif key in ONE_VALUE:
            values_left = 1
            port_flag = token if key == "port" else None
            needs_value = token
        else:
            values_left = None  # an option the launcher does not know: any number of values
        keys.append(key)
    if port_flag is not None:
        _check_port(port_flag, None)
    if needs_value is not None:
        raise _lacks_value(needs_value, None)
    return keys


def merge(launcher: list[Option], args: ContainerArgs) -> tuple[list[str], list[str]]:
    """Launcher options, minus those the user repeats, then the user's arguments verbatim.

    Returns (argv tail, keys overridden by the user)."""
    user_keys = set(args.keys)
    kept, overridden = [], []
    for option in launcher:
        stray = [value for value in option.values if option_key(value) is not None]
        if stray:  # every knob's parser should have refused it: a last guard against injection
            raise LaunchError(f"the value {stray[0]!r} of {option.flag} would read as an option of vLLM: "
                              "check the VL_* variable that sets it (values never start with '-').")
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
    def port(self) -> int | None:
        """--port, checked by the port rule (LaunchError when it is not a port), or None."""
        value = self.last("port")
        if value is None:
            return None
        if port_number(value) is None:
            raise LaunchError(f"container argument --port {value!r} is not a port number: give 1-65535.")
        return port_number(value)

    @property
    def max_model_len(self) -> int | None:
        """--max-model-len as a number of tokens when it is given as one (vLLM also reads "32k"), else None."""
        return max_model_len(self.tokens)
