"""A vLLM general plugin: /v1/messages thinking controls and effort levels reach the engine.

vLLM 0.27.1's Anthropic server drops `thinking` (disabled, enabled + budget_tokens, adaptive)
and turns `output_config.effort` into `reasoning_effort`, which only switches thinking on. The
launcher describes the served model in PREBAKE_THINKING (policy.py); without it this plugin
changes nothing about thinking. With or without it, two serving fixes hold (hooks.install_serving_fixes):
Claude Code's inline system messages are folded so the prefix cache keeps the conversation
(inline_system.py), and /v1/messages near the context limit is served or refused as Claude Code
expects (lengths.py). vLLM calls register() in every process it starts; the patches are applied
only where the modules they touch are imported (the API server).
"""

from __future__ import annotations

import os

from .policy import policy_from_env


def register() -> None:
    """vLLM's entry point. A malformed PREBAKE_THINKING stops vLLM here, with the variable named."""
    policy = policy_from_env(os.environ)
    from .hooks import install, install_serving_fixes

    if policy is not None:
        install(policy)
    install_serving_fixes()  # after install(): it adds to install()'s import hook
