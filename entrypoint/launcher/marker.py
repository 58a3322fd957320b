"""Read the build-time marker /opt/.image_prebaked (or $VL_PREBAKED_MARKER)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Mapping

from .report import EXIT_MARKER, LaunchError

DEFAULT_MARKER_PATH = "/opt/.image_prebaked"
IDENTITY = ("variant", "revision", "vllm", "cuda", "torch", "python", "created", "base_image", "stack_image")


@dataclass(frozen=True)
class Marker:
    path: str
    variant: str
    cuda_compat_dir: str | None
    launch_defaults: Mapping[str, str] = field(default_factory=dict)
    cuda: str | None = None  # CUDA release of the image, e.g. "13.0" (optional key)
    cuda_arch: str | None = None  # compute capability the variant targets (optional key)
    identity: Mapping[str, str] = field(default_factory=dict)  # what the banner and the status page name

    def banner(self) -> str:
        """The container's first line: which image this is, so that "the fix did not work" and "the fix has
        not arrived yet" can be told apart."""
        get = self.identity.get
        return (f"image prebake {self.variant}, revision {get('revision', '?')}, vLLM {get('vllm', '?')}, "
                f"CUDA {self.cuda or '?'}, torch {get('torch', '?')}, built {get('created', '?')} ({self.path})")


def _fail(path: str, what: str) -> LaunchError:
    return LaunchError(
        subject="VL_PREBAKED_MARKER", value=path,
        problem=f"this image was not prebaked: {what} ({path}). The launcher only starts vLLM from an image built "
                "by prebake (`./build.py --variant ...`), which writes that marker; it never installs anything at "
                "run time",
        fix="Use a prebake image, or point VL_PREBAKED_MARKER at the marker file.", exit_code=EXIT_MARKER)


def read_marker(env: Mapping[str, str]) -> Marker:
    path = env.get("VL_PREBAKED_MARKER") or DEFAULT_MARKER_PATH
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError:
        raise _fail(path, "marker file missing") from None
    except (OSError, UnicodeDecodeError) as err:
        raise _fail(path, f"marker unreadable: {err}") from None
    except json.JSONDecodeError as err:
        raise _fail(path, f"marker is not JSON: {err}") from None
    except RecursionError:
        raise _fail(path, "marker is not a JSON object (nested too deep)") from None
    if not isinstance(data, dict):
        raise _fail(path, "marker is not a JSON object")

    variant = data.get("variant")
    if not isinstance(variant, str) or not variant:
        raise _fail(path, 'marker has no "variant" string')
    compat = data.get("cuda_compat_dir")
    if compat is not None and not isinstance(compat, str):
        raise _fail(path, '"cuda_compat_dir" must be a path string or null')
    defaults = data.get("launch_defaults") or {}
    if not isinstance(defaults, dict) or not all(
        isinstance(k, str) and k.startswith("VL_") and isinstance(v, str) for k, v in defaults.items()
    ):
        raise _fail(path, '"launch_defaults" must map VL_* names to string values')
    cuda = data.get("cuda")
    arch = data.get("cuda_arch")
    return Marker(
        path=path,
        variant=variant,
        cuda_compat_dir=compat or None,
        launch_defaults=dict(defaults),
        cuda=cuda if isinstance(cuda, str) else None,
        cuda_arch=arch if isinstance(arch, str) else None,
        identity={key: data[key] for key in IDENTITY if isinstance(data.get(key), str) and data[key]},
    )
