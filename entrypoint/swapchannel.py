"""The swap channel's messages, typed: one end of a socketpair handed to the bridge at its start (--control-fd). It has
no address, so nothing outside the container (or inside it) can ask for a swap. Each message is one JSON line.

bridge -> launcher (commands: the bridge's scheduler decides, the launcher does it to processes)
    Switch(model)        restart-based swaps: stop vLLM, start the model's plan
    Start(model)         sleep mode: (re)start the model's vLLM (its process group stopped first if it runs), the
                         other models' untouched
    Stop(model)          sleep mode: stop the model's vLLM (it failed to sleep)
    Serving(model)       the model answered its health check: from now on its exit is the container's exit, as
                         without swapping
    GiveUp(model, why)   the model, the previous one, did not come back after a failed swap: the container ends
launcher -> bridge (events, each with the launcher's record's state once it happened, modelstate.ModelState)
    Started(model, state, pid)
    Exited(model, state, code)
    Stopped(model, state, seconds, vram_used_mib, vram_released)
On the wire: {"op": "switch", "model": NAME}, {"event": "stopped", "model": NAME, "state": "available", ...}.
A line that is not one of these is read as None (and skipped by both ends). Stdlib only, like the launcher.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from typing import ClassVar, Union

from .modelstate import ModelState


@dataclass(frozen=True)
class _ToLauncher:
    model: str


@dataclass(frozen=True)
class Switch(_ToLauncher):
    op: ClassVar[str] = "switch"


@dataclass(frozen=True)
class Start(_ToLauncher):
    op: ClassVar[str] = "start"


@dataclass(frozen=True)
class Stop(_ToLauncher):
    op: ClassVar[str] = "stop"


@dataclass(frozen=True)
class Serving(_ToLauncher):
    op: ClassVar[str] = "serving"


@dataclass(frozen=True)
class GiveUp(_ToLauncher):
    why: str = ""
    op: ClassVar[str] = "give_up"


@dataclass(frozen=True)
class _ToBridge:
    model: str
    state: ModelState  # the launcher's record's, once the event happened


@dataclass(frozen=True)
class Started(_ToBridge):
    pid: int
    event: ClassVar[str] = "started"


@dataclass(frozen=True)
class Exited(_ToBridge):
    code: int
    event: ClassVar[str] = "exited"


@dataclass(frozen=True)
class Stopped(_ToBridge):
    seconds: float
    vram_used_mib: tuple[int, ...] | None = None  # every GPU's memory.used once it stopped (None: not read)
    vram_released: bool | None = None  # below the launcher's threshold in time (None: not waited for)
    event: ClassVar[str] = "stopped"


Command = Union[Switch, Start, Stop, Serving, GiveUp]
Event = Union[Started, Exited, Stopped]
COMMANDS: dict[str, type] = {kind.op: kind for kind in (Switch, Start, Stop, Serving, GiveUp)}
EVENTS: dict[str, type] = {kind.event: kind for kind in (Started, Exited, Stopped)}


def line_of(message: Command | Event) -> bytes:
    """One message as it crosses the channel, either way."""
    tag = {"op": message.op} if isinstance(message, _ToLauncher) else {"event": message.event}
    body = {field.name: getattr(message, field.name) for field in fields(message)}
    if body.get("vram_used_mib") is not None:
        body["vram_used_mib"] = list(body["vram_used_mib"])
    return json.dumps({**tag, **body}).encode() + b"\n"


def _build(kinds: dict[str, type], tag: object, data: dict) -> Command | Event | None:
    kind = kinds.get(tag) if isinstance(tag, str) else None
    if kind is None:
        return None
    try:
        message = kind(**{field.name: data[field.name] for field in fields(kind) if field.name in data})
    except TypeError:  # a field it must have is missing
        return None
    if not isinstance(message.model, str):
        return None
    if isinstance(message, _ToBridge):
        try:
            message = replace(message, state=ModelState(message.state))
        except ValueError:
            return None
    if isinstance(message, Stopped) and isinstance(message.vram_used_mib, list):
        message = replace(message, vram_used_mib=tuple(message.vram_used_mib))
    return message


def _object(line: bytes | str) -> dict:
    try:
        data = json.loads(line)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def read_command(line: bytes | str) -> Command | None:
    """The bridge's command in `line`, or None when it is none."""
    data = _object(line)
    return _build(COMMANDS, data.get("op"), data)


def read_event(line: bytes | str) -> Event | None:
    """The launcher's event in `line`, or None when it is none."""
    data = _object(line)
    return _build(EVENTS, data.get("event"), data)
