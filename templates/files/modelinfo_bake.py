"""Bake vLLM's model-info cache for the given architectures, in this one process, at build time.

    python modelinfo_bake.py OUT_DIR ARCHITECTURE...

vLLM's registry (vllm/model_executor/models/registry.py, `_LazyRegisteredModel.inspect_model_cls`)
answers "what can this model class do" from `$VLLM_CACHE_ROOT/modelinfos/<module>-<class>.json` when
that file's `hash` is the one of the model module's source; otherwise it imports the class in a
SUBPROCESS that imports vLLM again (7-27 s of every new pod). Here vLLM is imported once and its own
inspection runs with the subprocess replaced by a plain call, so vLLM itself computes the hash and
writes each file. Then every architecture is inspected again with the subprocess forbidden: the build
fails unless vLLM answers each one from the files made here.

OUT_DIR gets modelinfos/*.json (vLLM's files, as it writes them) and modelinfos.json, the manifest the
launcher and the self-test read without importing vLLM: for each architecture its file, hash, module
and the module's source path under the vllm package.
"""

import importlib.util
import json
import os
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, architectures = Path(argv[0]), list(dict.fromkeys(argv[1:]))
    os.environ["VLLM_CACHE_ROOT"] = str(out)  # vllm.envs reads it at each access
    started = time.monotonic()
    import vllm
    from vllm.model_executor.models import registry

    imported = time.monotonic() - started
    package = Path(vllm.__file__).resolve().parent
    unknown = [arch for arch in architectures if not isinstance(registry.ModelRegistry.models.get(arch),
                                                                registry._LazyRegisteredModel)]
    if unknown:
        print(f"error: vLLM {vllm.__version__} registers no lazily imported model class named "
              f"{', '.join(unknown)}: fix `architecture` in entrypoint/models.toml (or the extra list in "
              "prebake/modelinfos.py) and render again", file=sys.stderr)
        return 1

    real_subprocess = registry._run_in_subprocess
    registry._run_in_subprocess = lambda fn: fn()  # the in-process inspection: vLLM hashes and saves
    manifest = {}
    for arch in architectures:
        model = registry.ModelRegistry.models[arch]
        began = time.monotonic()
        model.inspect_model_cls()
        source = Path(importlib.util.find_spec(model.module_name).origin).resolve()
        cached = json.loads((out / "modelinfos" / model._get_cache_filename()).read_text())
        manifest[arch] = {"file": model._get_cache_filename(), "hash": cached["hash"],
                          "module": model.module_name, "source": source.relative_to(package).as_posix()}
        print(f"{arch}: {model._get_cache_filename()} hash {cached['hash']} ({time.monotonic() - began:.1f} s)")

    def forbidden(fn):
        raise RuntimeError("vLLM's registry would start its subprocess: the baked file was not used")

    registry._run_in_subprocess = forbidden
    for arch in architectures:
        registry.ModelRegistry.models[arch].inspect_model_cls()
    registry._run_in_subprocess = real_subprocess
    (out / "modelinfos.json").write_text(json.dumps({"vllm": vllm.__version__, "architectures": manifest},
                                                    indent=1, sort_keys=True) + "\n")
    print(f"{len(manifest)} model-info files for vLLM {vllm.__version__}; import {imported:.1f} s, "
          f"total {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
