"""CUDA forward compatibility: whether to put the baked compat libraries first on LD_LIBRARY_PATH."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Mapping

from .report import EXIT_HOST, Decision, LaunchError
from .loader import LD_CACHE, LD_SO_CONF, Library, LoaderView, exec_folder, host_driver_links, view
from .marker import Marker
from .probe import Host

# Oldest driver branch that runs a CUDA release natively; older drivers need the
# forward-compatibility userspace driver (cuda-compat-<release>).
NATIVE_DRIVER_FOR_CUDA = {"13": 580, "12": 525}
# The oldest branch cuda-compat-13-0 supports (NVIDIA_REQUIRE_CUDA of CUDA 13.0 images
# lists 535, 550, 565, 570, 575; see tests/fixtures/real-h200/env.txt).
OLDEST_COMPAT_DRIVER = 535


@dataclass(frozen=True)
class CompatResult:
    ld_library_path: str | None  # new value, or None when unchanged
    decision: Decision
    loader: tuple[Decision, ...] = ()  # what the runtime set up, and what vLLM will load
    links_dir: str | None = None  # created before exec: soname links to the host's driver libraries
    links: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)  # other variables the loader decision sets
    libcuda: str | None = None  # the libcuda.so.1 the loader will give vLLM, None when there is none


def supports_forward_compat(gpu_name: str) -> bool:
    # NVIDIA supports forward compatibility on data-centre GPUs and professional
    # (RTX/Quadro, NGC-ready) boards, not on GeForce or TITAN consumer parts.
    name = gpu_name.lower()
    return "geforce" not in name and "titan" not in name


def decide_compat(host: Host, marker: Marker, env: Mapping[str, str]) -> CompatResult:
    """The launcher's compat decision, then what the loader will really load, made to agree."""
    result = _decide_compat(host, marker, env)
    return reconcile(result, host, env)


def _describe(library: Library | None, driver_version: str) -> str:
    if library is None:
        return "no libcuda.so.1"
    if library.version == driver_version:
        kind = f"the host driver's libcuda {library.version}"
    elif library.version:
        kind = f"CUDA compat libcuda {library.version}"
    else:
        kind = "libcuda of unknown version"
    return f"{kind} ({library.real_path}, via {library.via})"


def _evidence(seen: LoaderView) -> str:
    parts = []
    for conf, folders in seen.compat_confs:
        parts.append(f"the container runtime's enable-cuda-compat hook wrote {conf} naming {', '.join(folders)}")
    if seen.cache_error:
        parts.append(f"ld cache unreadable: {seen.cache_error}")
    elif seen.cache_entries:
        parts.append(f"{seen.cache_path} lists libcuda.so.1 in {', '.join(seen.cache_entries)}")
    else:
        parts.append(f"{seen.cache_path} lists no libcuda.so.1")
    return "; ".join(parts)


# vLLM's own opt-in (vllm/env_override.py, its PR #33992): any value but these puts a compat
# folder first on LD_LIBRARY_PATH for its workers, over the launcher's choice.
VLLM_COMPAT_VARIABLE = "VLLM_ENABLE_CUDA_COMPATIBILITY"
VLLM_COMPAT_OFF = ("", "0", "false", "no")


def reconcile(result: CompatResult, host: Host, env: Mapping[str, str]) -> CompatResult:
    result = _reconcile(result, host, env)
    compat_on = result.decision.decision.startswith("on")
    if compat_on or env.get(VLLM_COMPAT_VARIABLE, "").strip().lower() in VLLM_COMPAT_OFF:
        return result
    return replace(result, env={VLLM_COMPAT_VARIABLE: "0"}, loader=result.loader + (Decision(
        "loader", f"{VLLM_COMPAT_VARIABLE}=0 (was {env[VLLM_COMPAT_VARIABLE]!r})",
        "vLLM would put its CUDA compat folder first on its workers' LD_LIBRARY_PATH, over the host driver "
        f"{host.driver_version} the launcher chose"),))


def _reconcile(result: CompatResult, host: Host, env: Mapping[str, str]) -> CompatResult:
    cache, conf = env.get("VL_LD_CACHE") or LD_CACHE, env.get("VL_LD_SO_CONF") or LD_SO_CONF
    original = env.get("LD_LIBRARY_PATH", "")
    final_path = original if result.ld_library_path is None else result.ld_library_path
    runtime = view(env, original, cache, conf)
    final = view(env, final_path, cache, conf)
    compat_on = result.decision.decision.startswith("on")
    decisions = [Decision("loader", f"without the launcher: {_describe(runtime.libcuda, host.driver_version)}",
                          _evidence(runtime))]
    got = final.libcuda
    agree = "agrees with" if runtime.libcuda and got and runtime.libcuda.real_path == got.real_path else "overrides"
    if compat_on or got is None or got.version in (None, host.driver_version):
        wants = "CUDA compat" if compat_on else "the host driver"
        decisions.append(Decision("loader", f"vLLM loads {_describe(got, host.driver_version)}",
                                  f"the launcher chose {wants}; it {agree} what the runtime set up "
                                  f"(LD_LIBRARY_PATH={final_path or '(unset)'})"))
        return replace(result, loader=tuple(decisions), libcuda=got.path if got else None)
    # The launcher chose the host driver, and the runtime (cache) or LD_LIBRARY_PATH gives compat.
    links = host_driver_links(final, host.driver_version, got)
    if "libcuda.so.1" not in links:
        decisions.append(Decision(
            "loader", f"warning: vLLM loads {_describe(got, host.driver_version)}",
            f"the launcher chose the host driver {host.driver_version}, but no libcuda.so.{host.driver_version} "
            "was found beside the ld cache's entries to put first; set LD_LIBRARY_PATH to the host driver's folder"))
        return replace(result, loader=tuple(decisions), libcuda=got.path)
    links_dir = exec_folder(env, "prebake-host-driver")
    value = links_dir + (":" + final_path if final_path else "")
    decisions.append(Decision(
        "loader", f"vLLM loads the host driver's libcuda {host.driver_version} ({links['libcuda.so.1']}, via "
                  f"LD_LIBRARY_PATH {links_dir})",
        f"the launcher chose the host driver (driver {host.driver_version} runs CUDA natively), the runtime gave "
        f"compat {got.version}: {links_dir} holds {', '.join(f'{k} -> {v}' for k, v in links.items())}, first on "
        "LD_LIBRARY_PATH (created at exec)"))
    return replace(result, ld_library_path=value, loader=tuple(decisions), links_dir=links_dir, links=links,
                   libcuda=os.path.join(links_dir, "libcuda.so.1"))


def _decide_compat(host: Host, marker: Marker, env: Mapping[str, str]) -> CompatResult:
    cuda_major = (marker.cuda or "13").split(".", 1)[0]
    native = NATIVE_DRIVER_FOR_CUDA.get(cuda_major, 580)
    current = env.get("LD_LIBRARY_PATH", "")
    compat_dir = marker.cuda_compat_dir

    if host.driver_major >= native:
        # On a newer driver the compat library would be OLDER than the host's and NVIDIA
        # advises against putting it first; strip it if something already did.
        parts = [p for p in current.split(":") if p]
        kept = [p for p in parts if not compat_dir or os.path.normpath(p) != os.path.normpath(compat_dir)]
        why = f"driver {host.driver_version} runs CUDA {cuda_major} natively (>= {native})"
        if kept != parts:
            return CompatResult(":".join(kept), Decision("compat", "off (removed from LD_LIBRARY_PATH)", why))
        return CompatResult(None, Decision("compat", "off", why))

    consumer = sorted({gpu.name for gpu in host.gpus if not supports_forward_compat(gpu.name)})
    if consumer:
        raise LaunchError(
            subject="driver", value=host.driver_version,
            problem=f"driver {host.driver_version} is older than {native}, and {', '.join(consumer)} cannot use "
                    f"CUDA {cuda_major} forward compatibility (GeForce/TITAN parts are not supported by NVIDIA). "
                    f"The driver must be {native} or newer",
            fix=f"pick a host with driver >= {native} (CUDA {cuda_major}.0).", exit_code=EXIT_HOST)
    if host.driver_major < OLDEST_COMPAT_DRIVER:
        raise LaunchError(
            subject="driver", value=host.driver_version,
            problem=f"driver {host.driver_version} is older than {OLDEST_COMPAT_DRIVER}, the oldest branch the CUDA "
                    f"{cuda_major} compatibility libraries support",
            fix=f"Pick a host with driver >= {native}.", exit_code=EXIT_HOST)
    if not compat_dir:
        raise LaunchError(
            subject="cuda_compat_dir", value=None,
            problem=f"driver {host.driver_version} is older than {native} and needs the CUDA {cuda_major} "
                    f"compatibility libraries, but this image ({marker.variant}) was built without them "
                    f"(cuda_compat_dir is null in {marker.path})",
            fix=f"Use a variant built with cuda-compat, or a host with driver >= {native}.", exit_code=EXIT_HOST)
    if not os.path.isdir(compat_dir):
        raise LaunchError(
            subject="cuda_compat_dir", value=compat_dir,
            problem=f"driver {host.driver_version} needs the CUDA {cuda_major} compatibility libraries, but "
                    f"{compat_dir} (cuda_compat_dir in {marker.path}) does not exist in this image",
            fix=f"Rebuild the image with cuda-compat, or pick a host with driver >= {native}.", exit_code=EXIT_HOST)
    # torch cu13 on a 570 driver: "driver too old (found version 12080)" without it; with it,
    # verified on an A40 pair: 2 GPUs, bf16 matmul OK (bootstrap lines 256-273).
    value = compat_dir + (":" + current if current else "")
    names = ", ".join(sorted({gpu.name for gpu in host.gpus}))
    return CompatResult(value, Decision(
        "compat", f"on: {compat_dir} first on LD_LIBRARY_PATH",
        f"driver {host.driver_version} is older than {native}; {names} support CUDA forward compatibility",
    ))
