"""Who may use the pod: the API key, where it comes from, where it goes, and that it is never printed.

A key arrives as the environment's VLLM_API_KEY (a RunPod secret) or as the container argument
`--api-key KEY`. With the keep-alive bridge, the bridge checks it (both `Authorization: Bearer` and
`x-api-key`, which vLLM alone does not read), so vLLM gets neither the argument nor the variable:
vLLM on its loopback port would otherwise refuse the Anthropic SDK's `x-api-key` the bridge let in.
With VL_BRIDGE=off, vLLM checks it itself, as it always did. Stdlib only, like the launcher.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..contract import VLLM_KEY_VARIABLE  # what vLLM reads, and the bridge
from ..contract import RUNPOD_KEY_VARIABLE, key_problem
from .cmdline import ContainerArgs, api_key_lacks_value, option_spans
from .report import LaunchError

OPEN_WARNING = ("warning: no API key (VLLM_API_KEY unset, no --api-key): the endpoint is open to anyone with its "
                "URL, and a RunPod proxy URL is guessable from the pod id. Set VLLM_API_KEY from a RunPod secret "
                "(`./build.py runpod template --api-key-secret NAME ...` in the prebake repository).")


def keys_in(argv: list[str]) -> list[str]:
    keys = []
    for start, end in option_spans(argv, "api-key"):
        token = argv[start]
        keys.extend([token.split("=", 1)[1]] if "=" in token else argv[start + 1:end])
    return keys


def without_keys(argv: list[str]) -> list[str]:
    spans = option_spans(argv, "api-key")
    return [token for position, token in enumerate(argv) if not any(s <= position < e for s, e in spans)]


@dataclass(frozen=True)
class Access:
    key: str | None
    source: str  # "--api-key", "VLLM_API_KEY" or "none"
    bridged: bool = True

    def describe(self) -> str:
        if self.key is None:
            return OPEN_WARNING
        if not self.bridged:
            return (f"access: vLLM itself requires the API key on /v1 paths, as Authorization: Bearer only (from "
                    f"{self.source}; never printed; the keep-alive bridge also accepts x-api-key and guards every path)")
        return f"access: an API key is required on every request but /health (from {self.source}; never printed)"


def decide_access(env: Mapping[str, str], args: ContainerArgs, bridged: bool = True) -> Access:
    user_args = list(args.tokens)
    keys = keys_in(user_args)
    bare = any("=" not in user_args[start] and end == start + 1 for start, end in option_spans(user_args, "api-key"))
    if bare or any(not key for key in keys):
        raise api_key_lacks_value()
    for source, value in [*(("container argument --api-key", key) for key in keys),
                          *([(VLLM_KEY_VARIABLE, env[VLLM_KEY_VARIABLE])] if env.get(VLLM_KEY_VARIABLE) else [])]:
        problem = key_problem(value)
        if problem:
            raise LaunchError(subject=source, value=None, problem=f"{source} {problem}.")  # the key is never shown
    keys = [key.strip() for key in keys]  # whitespace around a key is no part of it (auth.api_key)
    if bridged and len(set(keys)) > 1:
        raise LaunchError(subject="--api-key", value=None,
                          problem=f"container argument --api-key names {len(set(keys))} keys: the keep-alive bridge "
                                  "checks one",
                          fix=f"give one key (or set {VLLM_KEY_VARIABLE}).")
    if keys:
        return Access(keys[0], "--api-key", bridged)
    if env.get(VLLM_KEY_VARIABLE):
        return Access(env[VLLM_KEY_VARIABLE].strip(), VLLM_KEY_VARIABLE, bridged)
    return Access(None, "none", bridged)


def bridge_environment(env: Mapping[str, str], access: Access) -> dict[str, str]:
    bridged = {name: value for name, value in env.items() if name != VLLM_KEY_VARIABLE}
    if access.key is not None:
        bridged[VLLM_KEY_VARIABLE] = access.key
    return bridged


# Secrets only the bridge uses: RunPod's pod-scoped key stops the pod (idle stop, serving/podstop.py). vLLM runs
# models' own code (--trust-remote-code) and never needs it.
BRIDGE_ONLY = frozenset({RUNPOD_KEY_VARIABLE})


def vllm_environment(env: Mapping[str, str]) -> dict[str, str]:
    """vLLM behind the bridge: no key of its own (the bridge already checked it), none of the bridge's secrets."""
    return {name: value for name, value in without_bridge_secrets(env).items() if name != VLLM_KEY_VARIABLE}


def without_bridge_secrets(env: Mapping[str, str]) -> dict[str, str]:
    """vLLM's environment in any mode (VL_BRIDGE=off too: it keeps VLLM_API_KEY, which it checks itself)."""
    return {name: value for name, value in env.items() if name not in BRIDGE_ONLY}
