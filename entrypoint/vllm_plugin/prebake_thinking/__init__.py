"""A vLLM general plugin: /v1/messages thinking controls and effort levels reach the engine.

vLLM 0.27.1's Anthropic server drops `thinking` (disabled, enabled + budget_tokens, adaptive)
and turns `output_config.effort` into `reasoning_effort`, which only switches thinking on. The
launcher describes the served model in PREBAKE_THINKING (policy.py); without it this plugin
changes nothing. vLLM calls register() in every process it starts; the patches are applied
only where the modules they touch are imported (the API server).
"""

from __future__ import annotations

import os

from .policy import policy_from_env


def register() -> None:
    """vLLM's entry point. A malformed PREBAKE_THINKING stops vLLM here, with the variable named."""
    policy = policy_from_env(os.environ)
    if policy is None:
        return
    from .hooks import install

    install(policy)
