"""The official SDKs as clients of a server (the bridge, nginx, the stand-in): no retries, a 30 s time-out."""

from __future__ import annotations

import anthropic
import openai


def openai_client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="none", max_retries=0, timeout=30)


def anthropic_client(server) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url, api_key="none", max_retries=0, timeout=30)
