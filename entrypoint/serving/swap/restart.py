"""Restart-based swaps: one vLLM; the launcher stops it and starts the other model's plan (minutes each).

Claude Code's background calls never cause such a swap (scheduler.py asks `background_swaps`).
"""

from __future__ import annotations

import time
from typing import Callable, Mapping

from ...contract import SwapConfig, swap_mode
from ...modelstate import START_ASKED, ModelState
from ...swapchannel import Stopped, Switch
from ..health import Health
from .link import LauncherLink, SwapProgress
from .model import SwapModel


class RestartSwaps:
    background_swaps = False  # a swap takes minutes: a title or a summary is not worth one

    def __init__(self, config: SwapConfig, link: LauncherLink, health: Health, models: Mapping[str, SwapModel],
                 progress: SwapProgress, log: Callable[[str], None]) -> None:
        self.config, self.link, self.health, self.models, self.progress, self.log = \
            config, link, health, models, progress, log

    @property
    def mode(self) -> str:
        return swap_mode(0)

    async def warm_up(self) -> None:
        """The first model, which the launcher started with the pod, is awake once it first answers."""
        await self.health.answered.wait()
        # refused when the model is no longer starting (a swap already moved it): nothing to do then
        self.models[self.progress.loaded].swap_state((ModelState.STARTING,), ModelState.AWAKE,
                                                     "it answered its health check")

    async def switch(self, model: str) -> tuple[str | None, str, str]:
        """Ask the launcher to run `model` instead of the loaded one: (None once it answers, else the cause;
        how; what the swap's time was spent on)."""
        stopped: list[Stopped] = []  # the launcher's news: the old vLLM is gone, `model` is loading

        def on_stopped(event: Stopped) -> None:
            stopped.append(event)
            if event.model in self.models:  # refused when it was not awake (it failed, or never answered): it stays so
                self.models[event.model].swap_state((ModelState.AWAKE,), ModelState.AVAILABLE,
                                                    "a swap stopped its vLLM")
            self.progress.now_loaded(model)  # `model` is what loads now

        cause = await self.link.run_until_healthy(Switch(model), on_stopped)
        if cause is not None:
            if refusal := self.models[model].swap_state(START_ASKED, ModelState.FAILED, cause):
                self.log(f"swap: {refusal}; the swap failed all the same")
            return cause, "restart", ""
        if refusal := self.models[model].swap_state((ModelState.STARTING,), ModelState.AWAKE,
                                                    "it answered its health check"):
            self.log(f"swap: {refusal}; it answers all the same")
        stopped_s = stopped[0].seconds if stopped else None
        return None, "restart", (f"stop {stopped_s} s, start to health "
                                 f"{time.monotonic() - self.link.started_at:.2f} s")
