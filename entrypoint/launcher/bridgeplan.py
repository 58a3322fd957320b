"""Who holds the exposed port: the keep-alive bridge (vLLM behind it on an internal port) or vLLM itself."""

from __future__ import annotations

from dataclasses import dataclass

from ..contract import is_loopback
from .cmdline import ContainerArgs, option_spans
from .report import Decision, LaunchError
from .knobs import Settings

ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")


@dataclass(frozen=True)
class Bridge:
    mode: str  # "keepalive" | "off"
    port: int  # the exposed port
    port_source: str  # the variable that named it
    vllm_host: str
    vllm_port: int
    heartbeat_s: float
    start_hold_s: float = 0.0  # VL_START_HOLD: how long a generation request waits for vLLM's start

    @property
    def upstream(self) -> str:
        """Where the bridge reaches vLLM."""
        host = "127.0.0.1" if self.vllm_host in ANY_ADDRESS else self.vllm_host
        return f"http://[{host}]:{self.vllm_port}" if ":" in host else f"http://{host}:{self.vllm_port}"

    def as_json(self) -> dict:
        return {"mode": self.mode, "port": self.port, "vllm_host": self.vllm_host, "vllm_port": self.vllm_port,
                "heartbeat_s": self.heartbeat_s if self.mode == "keepalive" else None,
                "start_hold_s": self.start_hold_s if self.mode == "keepalive" else None}


def decide_bridge(settings: Settings, args: ContainerArgs, exposed: int, exposed_why: str,
                  offset: int = 0) -> tuple[Bridge, Decision]:
    """`exposed` and `exposed_why`: the pod's port and the reason, from knobs.exposed_port. offset: a sleeping swap
    set's model's place in the set, each of its vLLMs listening on the internal port + its place."""
    source = exposed_why.split(" ", 1)[0]  # VL_PORT, or the script's VL_PROXY_PORT
    user_port, user_host = args.port, args.last("host")
    heartbeat = settings.value("VL_HEARTBEAT")
    if settings.value("VL_BRIDGE") == "off":
        bridge = Bridge("off", user_port or exposed, "--port" if user_port else source, user_host or "0.0.0.0",
                        user_port or exposed, heartbeat)
        return bridge, Decision("bridge", f"off: vLLM serves port {bridge.port} itself",
                                f"VL_BRIDGE=off from {settings.source('VL_BRIDGE')}; RunPod's HTTP proxy cuts a "
                                "request that stays silent ~100 s (a long prefill): expose a TCP port for those")
    vllm_port = (user_port or settings.value("VL_INTERNAL_PORT")) + offset
    named = "the container's --port" if user_port else "VL_INTERNAL_PORT"
    if offset:
        named += f" + {offset}, this model's place in the swap set"
    if vllm_port > 65535:
        raise LaunchError(subject="VL_INTERNAL_PORT", value=str(vllm_port),
                          problem=f"vLLM's port {vllm_port} ({named}) is beyond 65535",
                          fix="set VL_INTERNAL_PORT lower.")
    if vllm_port == exposed:
        raise LaunchError(subject="VL_INTERNAL_PORT", value=str(vllm_port),
                          problem=f"vLLM's port {vllm_port} ({named}) is also the keep-alive bridge's port ({source})",
                          fix=f"set VL_INTERNAL_PORT to another port, or VL_BRIDGE=off to let vLLM bind {exposed} "
                              "itself.")
    bridge = Bridge("keepalive", exposed, source, user_host if is_loopback(user_host) else "127.0.0.1", vllm_port,
                    heartbeat, settings.value("VL_START_HOLD") * 60)
    why = ("RunPod's HTTP proxy cuts a connection silent for ~100 s and vLLM sends nothing before its first token; "
           f"VL_BRIDGE from {settings.source('VL_BRIDGE')}")
    if heartbeat >= 90:
        why += f"; warning: VL_HEARTBEAT={heartbeat:g} s is too long to keep RunPod's proxy from cutting"
    return bridge, Decision(
        "bridge", f"keepalive: port {exposed} ({source}) relays to vLLM on {bridge.upstream[7:]} ({named}), "
                  f"heartbeat after {heartbeat:g} s of silence; " + start_hold_words(bridge.start_hold_s), why)


def start_hold_words(hold_s: float) -> str:
    if not hold_s:
        return "a request that arrives while vLLM starts gets 503 at once (VL_START_HOLD=0)"
    return (f"a generation request that arrives while vLLM starts is held up to {hold_s / 60:g} min (VL_START_HOLD) "
            "and answered once vLLM serves")


def behind_bridge(bridge: Bridge, args: ContainerArgs) -> tuple[ContainerArgs, Decision | None]:
    """The container arguments vLLM gets behind the keep-alive bridge: a --host that is not a loopback address is
    dropped (the bridge holds the public port; vLLM behind it has no key, and with sleep mode its development
    endpoints on), so that the launcher's --host 127.0.0.1 stands."""
    user_host = args.last("host")
    if bridge.mode != "keepalive" or user_host is None or is_loopback(user_host):
        return args, None
    spans = option_spans(args.tokens, "host")
    kept = [token for position, token in enumerate(args.tokens) if not any(s <= position < e for s, e in spans)]
    return ContainerArgs.of(kept), Decision(
        "vllm-host", f"{bridge.vllm_host}, not the container's --host {user_host}",
        "the keep-alive bridge listens on every interface for vLLM; vLLM behind it listens on loopback only: it has "
        "no API key of its own (the bridge checks it), and with sleep mode its development endpoints are on")
