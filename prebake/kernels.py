"""Which FlashInfer modules exist to prebuild, and for which architectures.

The table is templates/files/flashinfer_aot.py's GENERATORS (the script the kernels image runs;
it imports nothing but the standard library until it builds), so the names a variant may list
and the names the build knows cannot drift apart.
"""

import functools
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Sequence

from prebake.errors import PrebakeError

AOT_SCRIPT = Path(__file__).resolve().parent.parent / "templates" / "files" / "flashinfer_aot.py"


@functools.cache
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flashinfer_aot", AOT_SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def supported_archs() -> dict[str, tuple[str, ...] | None]:
    """Module name -> the compute capabilities its generator compiles for (None: any)."""
    return {name: archs for name, (_, _, archs) in _script().GENERATORS.items()}


def check_modules(path: Path, names: Sequence[str], cuda_arch: str) -> None:
    """Raise PrebakeError, naming the file and key, for a module that is unknown, listed twice or not for cuda_arch."""
    known = supported_archs()
    for number, name in enumerate(names):
        if name not in known:
            raise PrebakeError(f"{path}: key 'flashinfer_aot': unknown module {name!r}; known are "
                               f"{', '.join(known)} (GENERATORS in templates/files/flashinfer_aot.py)")
        if name in names[:number]:
            raise PrebakeError(f"{path}: key 'flashinfer_aot' lists {name!r} twice")
        archs = known[name]
        if archs is not None and cuda_arch not in archs:
            raise PrebakeError(f"{path}: key 'flashinfer_aot': {name} compiles for {', '.join(archs)} only, not this "
                               f"variant's cuda_arch {cuda_arch}; remove it (docs/caches.md says which modules each "
                               "GPU uses)")
