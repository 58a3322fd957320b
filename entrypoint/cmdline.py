"""The `vllm serve` option list, and how container arguments are merged into it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import LaunchError

# vLLM's short spellings of options the launcher sets.
SHORT_ALIASES = {"-tp": "tensor-parallel-size", "-dp": "data-parallel-size",
                 "-pp": "pipeline-parallel-size", "-q": "quantization"}
_NUMBER = re.compile(r"-[0-9.]+(e-?[0-9]+)?")


@dataclass(frozen=True)
class Option:
    flag: str  # "--max-model-len"
    values: tuple[str, ...] = ()

    def argv(self) -> list[str]:
        return [self.flag, *self.values]


def option_key(token: str) -> str | None:
    """The option a token names, in one spelling: --max_model_len, --max-model-len=4 and
    --no-enable-prefix-caching name max-model-len and enable-prefix-caching."""
    if token in SHORT_ALIASES:
        return SHORT_ALIASES[token]
    if not token.startswith("-") or token == "--" or _NUMBER.fullmatch(token):
        return None
    name = token.lstrip("-").split("=", 1)[0].replace("_", "-")
    return name[3:] if token.startswith("--no-") else name


def user_option_keys(user_args: list[str]) -> list[str]:
    """Keys of the options in the container arguments, refusing what would bypass the launcher."""
    keys = []
    for position, token in enumerate(user_args):
        key = option_key(token)
        if key is None:
            if position == 0:
                raise LaunchError(
                    f"container argument {token!r} is not an option: the model is chosen with VL_MODEL "
                    "(container arguments are options appended to `vllm serve`, e.g. --max-num-seqs 32).")
            continue
        if key == "model":
            raise LaunchError("container argument --model is not accepted: set VL_MODEL (a catalogue key or "
                              "a Hugging Face repo id) so that the launcher sizes the context for it.")
        keys.append(key)
    return keys


def merge(launcher: list[Option], user_args: list[str]) -> tuple[list[str], list[str]]:
    """Launcher options, minus those the user repeats, then the user's arguments verbatim.

    Returns (argv tail, keys overridden by the user)."""
    user_keys = set(user_option_keys(user_args))
    kept, overridden = [], []
    for option in launcher:
        key = option_key(option.flag)
        if key in user_keys:
            overridden.append(key)
        else:
            kept.extend(option.argv())
    return kept + list(user_args), overridden
