"""Swaps with vLLM's sleep mode (SwapConfig.sleep_level 1 or 2, launcher/swap/sleepmode.py): every model runs its own vLLM
on its own port, each started once at the pod's start, one after another, and put to sleep; a swap puts the loaded
one to sleep and wakes the other (level 2: its weights reloaded from disk). Two are never awake at once on the GPU
(a wake that ran out of memory left that vLLM broken). A wake that fails restarts that model's vLLM; a model that
fails to sleep is stopped. /sleep, /wake_up and the rest of vLLM's development endpoints are asked here, on vLLM's
internal port: the bridge never relays them (auth.INSIDE_ONLY).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Callable, Mapping

import aiohttp

from ...contract import SwapConfig, swap_mode
from ...modelstate import MAY_SLEEP, START_ASKED, STARTABLE_EVEN_ASLEEP, ModelState, SwapPhase
from ...swapchannel import GiveUp, Serving, Start, Stop
from ..health import Health
from .link import LauncherLink, SwapProgress
from .model import SwapModel

# A level-1 sleep copies the weights to pinned host RAM (the first one took 13 s on an H200 for an 8B-like model,
# later ones 0.4 s), a wake copies them back; past these, the vLLM is taken for broken.
SLEEP_TIMEOUT_S = 120.0
WAKE_TIMEOUT_S = 120.0
S = ModelState


class SleepSwaps:
    background_swaps = True  # a swap takes about a second: every request gets the model it names

    def __init__(self, config: SwapConfig, link: LauncherLink, health: Health, models: Mapping[str, SwapModel],
                 progress: SwapProgress, log: Callable[[str], None]) -> None:
        self.config, self.link, self.health, self.models, self.progress, self.log = \
            config, link, health, models, progress, log
        self.level = config.sleep_level  # the pod's phase begins WARMING (Swapper)

    @property
    def mode(self) -> str:
        return swap_mode(self.level)

    async def warm_up(self) -> None:
        """At the pod's start: the first model is loading (the launcher started it). Once it answers, it sleeps;
        every other model starts, answers and sleeps in turn; then the first one wakes."""
        first = self.progress.loaded
        try:
            await self.health.answered.wait()
            # starting since the pod's start: no swap runs before the warm-up's end (Swapper.kick)
            if refusal := self.models[first].swap_state((S.STARTING,), S.AWAKE, "it answered its health check"):
                self.log(f"swap: {refusal}; the warm-up goes on")
            began = time.monotonic()
            await self.first_request(first)
            for name in [m.name for m in self.config.models[1:]]:
                await self.sleep_awake(except_model=None)
                self.progress.warming_up(name)
                cause = await self.start_or_stop(name)
                if cause is not None:
                    self.log(f"swap: {name} could not be started ({cause}); a request for it tries again")
                    continue
                await self.first_request(name)
                await self.sleep_awake(except_model=None)
            self.progress.warming_up(None)
            cause, _ = await self.bring_up(first)
            if cause is not None:
                if refusal := self.progress.break_down(
                        (SwapPhase.WARMING,), f"no model is served: {first} did not come back after the swap set's "
                                              f"models started ({cause}). The container's log says why."):
                    self.log(f"swap: {refusal}; the pod is broken all the same")
                self.log(f"swap: error: {self.progress.broken}")
                self.link.command(GiveUp(first, self.progress.broken))
                return
            self.progress.now_loaded(first)
            self.link.command(Serving(first))
            states = ", ".join(f"{m.name} {m.state}" for m in self.models.values())
            self.log(f"swap: every model started once in {time.monotonic() - began:.1f} s ({states}): swaps now "
                     f"sleep and wake (level {self.level})")
        finally:
            self.progress.warming_up(None)
            # refused once BROKEN: the pod stays broken, which is what every request is then answered
            self.progress.enter((SwapPhase.WARMING,), SwapPhase.SERVING, "every model started once")

    async def switch(self, model: str) -> tuple[str | None, str, str]:
        """Put whatever is awake to sleep, then wake `model` (or start it again when it has no vLLM, or when its
        wake fails): (None once it answers its health check, else the cause; how; where the time went)."""
        slept = await self.sleep_awake(except_model=model)
        woke_s = time.monotonic()
        cause, how = await self.bring_up(model)
        return cause, f"{self.mode} + {how}", f"sleep {slept:.2f} s, {how} to health {time.monotonic() - woke_s:.2f} s"

    async def first_request(self, model: str) -> None:
        """A two-token completion before the model first sleeps: what a vLLM does once, at its first request (ngram
        speculation's JIT: 2.1 s on an H200), is not paid by the first client after a swap."""
        began = time.monotonic()
        cause = await self.vllm_call(model, "POST", "/v1/completions", self.config.load_s,
                                     {"model": model, "prompt": "Hello", "max_tokens": 2})
        self.log(f"swap: {model}'s first request " + (f"took {time.monotonic() - began:.2f} s" if cause is None else
                                                       f"failed ({cause}); it still sleeps"))

    async def sleep_awake(self, except_model: str | None) -> float:
        """Every awake model but except_model goes to sleep (one at most: two are never awake together); one that
        does not is stopped. Returns the seconds it took."""
        began = time.monotonic()
        for name, state in [(m.name, m.state) for m in self.models.values()]:
            if name == except_model or state not in MAY_SLEEP:
                continue
            cause = await self.vllm_call(name, "POST", f"/sleep?level={self.level}", SLEEP_TIMEOUT_S)
            if cause is None:
                cause = await self.expect_sleeping(name, True)
            if cause is None:
                if refusal := self.models[name].swap_state(MAY_SLEEP, S.ASLEEP, "it went to sleep"):
                    self.log(f"swap: {refusal}; it is left so")
                continue
            self.log(f"swap: {name} did not go to sleep ({cause}): its vLLM is stopped, and started again when "
                     "it is wanted")
            self.link.command(Stop(name))
            await self.link.wait_stopped(name)
            # down already when the launcher's news of its exit came first
            if refusal := self.models[name].swap_state(MAY_SLEEP | {S.DOWN}, S.DOWN,
                                                       "it did not go to sleep and was stopped"):
                self.log(f"swap: {refusal}; it is left so")
        return time.monotonic() - began

    async def bring_up(self, model: str) -> tuple[str | None, str]:
        """Wake `model`, or start its vLLM when it has none or the wake fails. (None once it answers, else the
        cause; how: wake, restart when the wake failed, start when it had no vLLM)."""
        how = "start"
        if self.models[model].state is S.ASLEEP:
            cause = await self.wake(model)
            if cause is None:
                if refusal := self.models[model].swap_state((S.ASLEEP,), S.AWAKE, "it woke"):
                    self.log(f"swap: {refusal}; it answers all the same")
                return None, "wake"
            self.log(f"swap: {model} did not wake ({cause}): its vLLM is started again")
            how = "restart"
        return await self.start_or_stop(model), how

    async def start_or_stop(self, model: str) -> str | None:
        """Start `model`'s vLLM: awake once it answers (None), else failed and stopped, so that it holds no GPU
        memory the next model would need (the cause)."""
        swapping = self.models[model]
        if refusal := swapping.swap_state(STARTABLE_EVEN_ASLEEP, S.STARTING, "a swap starts its vLLM"):
            self.log(f"swap: {refusal}; it is started all the same")
        self.health.follow(self.link.upstream(model))
        cause = await self.link.run_until_healthy(Start(model))
        if cause is None:
            if refusal := swapping.swap_state((S.STARTING,), S.AWAKE, "it answered its health check"):
                self.log(f"swap: {refusal}; it answers all the same")
            return None
        if refusal := swapping.swap_state(START_ASKED, S.FAILED, cause):
            self.log(f"swap: {refusal}; it is stopped all the same")
        self.link.command(Stop(model))
        await self.link.wait_stopped(model)
        return cause

    async def wake(self, model: str) -> str | None:
        cause = await self.vllm_call(model, "POST", "/wake_up", WAKE_TIMEOUT_S)
        if cause is None and self.level == 2:  # the weights were discarded: read them again
            cause = await self.vllm_call(model, "POST", "/collective_rpc", self.config.load_s,
                                         {"method": "reload_weights"})
        if cause is None:
            cause = await self.expect_sleeping(model, False)
        if cause is None:
            self.health.follow(self.link.upstream(model))
            if not await self.link.healthy():
                cause = self.health.problem or "GET /health failed after the wake"
        return cause

    async def expect_sleeping(self, model: str, asleep: bool) -> str | None:
        answer: dict = {}
        cause = await self.vllm_call(model, "GET", "/is_sleeping", 10.0, into=answer)
        if cause is None and answer.get("is_sleeping") is not asleep:
            cause = f"GET /is_sleeping answered {answer.get('is_sleeping')!r}"
        return cause

    async def vllm_call(self, model: str, method: str, path: str, timeout_s: float, body: dict | None = None,
                        into: dict | None = None) -> str | None:
        """One call to `model`'s vLLM on its internal port; None when it answers 200, else what went wrong."""
        try:
            async with self.link.session.request(method, self.link.upstream(model) + path, json=body,
                                            timeout=aiohttp.ClientTimeout(total=timeout_s)) as answer:
                text = await answer.text()
                if answer.status != 200:
                    return f"{method} {path.split('?')[0]} answered {answer.status}: {text[:200]}"
                if into is not None:
                    found = json.loads(text or "{}")
                    into.update(found if isinstance(found, dict) else {})
        except asyncio.TimeoutError:
            return f"{method} {path.split('?')[0]} did not answer within {timeout_s:g} s"
        except (aiohttp.ClientError, ValueError) as err:
            return f"{method} {path.split('?')[0]} failed ({type(err).__name__})"
        return None
