"""modelinfos: vLLM's model-info cache baked into the image (templates/files/modelinfo_bake.py) answers every
architecture of the image's catalogue with the image's vLLM: each baked file's hash is the one vLLM computes
from the model module's source now (so a new pod's vLLM reads it instead of inspecting the class in a
subprocess). Read through the image's own launcher module (entrypoint/launcher/modelinfos.py, which copies
the files at start), in a child that does not import vLLM."""

import os

from ..common import VARIANT, Skipped
from ..programs.entrypoint_door import ChildFailed, run_child_json

NAME = "modelinfos"
LEVEL = VARIANT  # the catalogue is in the entrypoint's layer, the files in the variant's

PROBE = r"""
import json, os, sys
load_catalogue = door.image_module(ENTRYPOINT, "launcher.catalogue").load_catalogue
infos = door.image_module(ENTRYPOINT, "launcher.modelinfos")
BAKED_DIR, SUBFOLDER, load_baked, module_hash, stored_hash, vllm_package = (
    infos.BAKED_DIR, infos.SUBFOLDER, infos.load_baked, infos.module_hash, infos.stored_hash, infos.vllm_package)
baked, package = load_baked(), vllm_package()
found = {}
for entry in baked or ():
    source = package / entry.source
    found[entry.architecture] = {"hash": entry.hash, "source": str(source),
                                 "now": module_hash(source) if source.is_file() else None,
                                 "file": stored_hash(os.path.join(BAKED_DIR, SUBFOLDER, entry.file))}
catalogue = sorted({spec.architecture for spec in load_catalogue().values() if spec.architecture})
print(json.dumps({"dir": BAKED_DIR, "baked": None if baked is None else found, "catalogue": catalogue,
                  "vllm_imported": "vllm" in sys.modules}))
"""


def verdict(found):
    baked, where = found["baked"], found["dir"]
    if not baked:
        return False, (f"{where} holds no model-info manifest (modelinfos.json){'' if baked is None else ' it can read'}: "
                       "the variant's step 7c did not run; render and build again")
    problems = [f"the catalogue's {arch} is not baked" for arch in found["catalogue"] if arch not in baked]
    for arch, entry in sorted(baked.items()):
        if entry["now"] != entry["hash"]:
            problems.append(f"{arch}: baked for hash {entry['hash']}, but {entry['source']} hashes to {entry['now']} "
                            "(vLLM changed after the bake)")
        elif entry["file"] != entry["hash"]:
            problems.append(f"{arch}: the baked file's hash is {entry['file']}, the manifest's {entry['hash']}")
    if problems:
        return False, "; ".join(problems) + "; a new pod's vLLM would inspect these in a subprocess"
    return True, (f"{len(baked)} architectures baked for the image's vLLM module sources, every one of the "
                  f"catalogue's among them: {', '.join(sorted(baked))}")


def check(spec):
    if "vllm" not in spec["pins"]:
        raise Skipped("the lock pins no vllm")
    try:
        found = run_child_json(os.path.dirname(spec["bridge"]), PROBE, "the launcher's modelinfos module", 120)
    except ChildFailed as err:
        return False, str(err)
    if found["vllm_imported"]:
        return False, "reading the baked model-info cache imported vLLM (it must not: the launcher reads it)"
    return verdict(found)
