"""The model catalogue (models.toml) as frozen dataclasses, and VL_MODEL resolution."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

if sys.version_info >= (3, 11):
    import tomllib
else:  # the image runs 3.12; this keeps older interpreters working
    import tomli as tomllib

from .report import LaunchError
from .knobs import KNOBS_BY_NAME, SPEC_METHODS, repo_id, BadValue

# entrypoint/: the data files sit beside launch.py, where the build side reads them too
CATALOGUE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "models.toml")
METHODS = tuple(m for m in SPEC_METHODS if m != "on")  # "on" is VL_SPEC's spelling of ngram
# Oldest compute capability of each family a catalogue entry may require, and why it would.
GPU_FAMILIES = {
    "ampere": ((8, 0), "Ampere or newer (compute capability 8.0+)"),
    "ada": ((8, 9), "Ada or newer (compute capability 8.9+)"),
    "hopper": ((9, 0), "Hopper or newer (compute capability 9.0+)"),
    "blackwell": ((10, 0), "Blackwell (compute capability 10.0+)"),
}


@dataclass(frozen=True)
class ModelFlag:
    flag: str
    value: str | None = None
    knob: str | None = None
    switch: bool = False


@dataclass(frozen=True)
class ModelSpec:
    key: str  # catalogue key, or the repo id for a model outside the catalogue
    repo: str
    served_name: str
    in_catalogue: bool
    architecture: str | None = None  # the checkpoint's `architectures` entry; None outside the catalogue
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    reasoning_off: tuple[tuple[str, object], ...] = ()  # chat_template_kwargs that turn reasoning off
    trust_remote_code: bool = False
    tokenizer: str | None = None
    native_context: int | None = None  # None: unknown, vLLM derives it from the config
    yarn_factor: float | None = None
    kv_cache_dtype: str = "auto"
    weights_gib: float | None = None  # None: unknown, no sizing from VRAM
    kv_bytes_per_token: int | None = None
    overhead_gib_per_gpu: float = 0.0  # non-KV memory per GPU at TP 1 without speculation
    overhead_tp_gib_per_gpu: float = 0.0  # added per GPU when tensor parallel > 1
    request_state_gib: float = 0.0  # per request beyond the attention KV (a hybrid's recurrent state pages)
    state_groups: int = 0  # a hybrid's recurrent-layer groups in vLLM's allocator (recurrent layers / attention layers)
    sizing_basis: str = ""  # where the sizing figures come from: measured by the script, or estimated from what
    gpu_family: str | None = None  # oldest GPU family the weights run on (see GPU_FAMILIES)
    gpu_family_why: str = ""
    speculation: str = "off"
    speculation_allowed: tuple[str, ...] = ("off",)
    mtp_tokens: int = 2
    ngram_schedule: tuple[tuple[int, int, int], ...] = ()
    flags: tuple[ModelFlag, ...] = ()
    notes: str = ""


_FIELDS = {
    "architecture": str, "repo": str, "served_name": str, "tool_call_parser": str, "reasoning_parser": str, "reasoning_off": dict,
    "trust_remote_code": bool, "tokenizer": str, "native_context": int, "yarn_factor": float,
    "kv_cache_dtype": str, "weights_gib": float, "kv_bytes_per_token": int,
    "overhead_gib_per_gpu": float, "overhead_tp_gib_per_gpu": float, "request_state_gib": float, "state_groups": int,
    "sizing_basis": str, "gpu_family": str, "gpu_family_why": str, "speculation": str, "speculation_allowed": list,
    "mtp_tokens": int, "ngram_schedule": list, "flags": list, "notes": str,
}
_REQUIRED = ("architecture", "repo", "served_name", "native_context", "weights_gib", "kv_bytes_per_token")


def _bad(path: str, key: str, what: str) -> LaunchError:
    return LaunchError(subject=f"{path} [models.{key}]", value=key,
                       problem=f"model catalogue {path}: [models.{key}] {what}", fix="fix the catalogue entry.")


def _model_from_table(path: str, key: str, table: dict) -> ModelSpec:
    for name, value in table.items():
        kind = _FIELDS.get(name)
        if kind is None:
            raise _bad(path, key, f"has unknown field {name!r} (known: {', '.join(_FIELDS)})")
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise _bad(path, key, f"field {name!r} must be a {kind.__name__}")
    missing = [name for name in _REQUIRED if name not in table]
    if missing:
        raise _bad(path, key, f"lacks {', '.join(missing)}")
    allowed = tuple(table.get("speculation_allowed", ["off"]))
    default = table.get("speculation", "off")
    if not set(allowed) <= set(METHODS) or default not in allowed or "off" not in allowed:
        raise _bad(path, key, f"speculation/speculation_allowed must be among {METHODS}, include off and the default")
    flags = []
    for entry in table.get("flags", []):
        unknown = set(entry) - {"flag", "value", "knob", "switch"}
        knob = entry.get("knob")
        if unknown or not str(entry.get("flag", "")).startswith("--") or (knob and knob not in KNOBS_BY_NAME):
            raise _bad(path, key, f"has an invalid flag entry {entry!r}")
        if knob and KNOBS_BY_NAME[knob].flag not in ("", entry["flag"]):
            raise _bad(path, key, f"has flag {entry['flag']} read from {knob}, which sets {KNOBS_BY_NAME[knob].flag} "
                                  "(knobs.py): name the knob's flag")
        flags.append(ModelFlag(entry["flag"], entry.get("value"), knob, bool(entry.get("switch", False))))
    fields = {name: value for name, value in table.items()
              if name not in ("flags", "speculation_allowed", "ngram_schedule", "reasoning_off")}
    if "reasoning_off" in table and "reasoning_parser" not in table:
        raise _bad(path, key, "has reasoning_off without a reasoning_parser: a model that does not reason has nothing to turn off")
    if "gpu_family" in table and table["gpu_family"] not in GPU_FAMILIES:
        raise _bad(path, key, f"field 'gpu_family' must be one of {', '.join(GPU_FAMILIES)}")
    for name in ("yarn_factor", "weights_gib", "overhead_gib_per_gpu", "overhead_tp_gib_per_gpu", "request_state_gib"):
        if name in fields:
            fields[name] = float(fields[name])
    return ModelSpec(
        key=key,
        in_catalogue=True,
        speculation_allowed=allowed,
        ngram_schedule=tuple(tuple(step) for step in table.get("ngram_schedule", [])),
        reasoning_off=tuple(sorted(table.get("reasoning_off", {}).items())),
        flags=tuple(flags),
        **fields,
    )


def load_catalogue(path: str = CATALOGUE_PATH) -> dict[str, ModelSpec]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise LaunchError(subject=path, value=None, problem=f"model catalogue {path} cannot be read: {err}",
                          fix="the image's catalogue is damaged: rebuild the image.") from None
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise LaunchError(subject=path, value=None, problem=f"model catalogue {path} has no [models.<key>] tables",
                          fix="the image's catalogue is damaged: rebuild the image.")
    return {key: _model_from_table(path, key, table) for key, table in models.items()}


def generic_model(repo: str) -> ModelSpec:
    """A repository outside the catalogue: nothing is assumed that could break it.

    No parsers (a wrong one corrupts output; add --tool-call-parser as a container argument),
    no trust-remote-code, no speculation, no YaRN, and no context sizing: vLLM derives the
    context from the model's config unless VL_CTX says otherwise.
    """
    short = repo.rsplit("/", 1)[-1].lower()
    return ModelSpec(key=repo, repo=repo, served_name=short, in_catalogue=False,
                     speculation_allowed=("off", "ngram"),  # ngram needs nothing from the model
                     notes="not in the catalogue: generic defaults")


def resolve_model(name: str, catalogue: dict[str, ModelSpec], source: str) -> ModelSpec:
    if name in catalogue:
        return catalogue[name]
    for spec in catalogue.values():  # the repo id of a catalogue model gets its catalogue entry
        if spec.repo == name:
            return spec
    try:
        return generic_model(repo_id(name))
    except BadValue:
        where = "" if source == "environment" else f" (from the image's {source})"
        raise LaunchError(
            subject="VL_MODEL", value=name, problem=f"VL_MODEL={name!r}{where} is not valid",
            fix=f"accepted values are a catalogue key ({', '.join(catalogue)}) or a Hugging Face repo id such as "
                "owner/name.") from None


def fits_family(model: ModelSpec, sms: list[tuple[int, int]]) -> bool:
    return model.gpu_family is None or min(sms) >= GPU_FAMILIES[model.gpu_family][0]


def check_gpu_family(model: ModelSpec, gpus: list[tuple[str, str, tuple[int, int]]],
                     catalogue: dict[str, ModelSpec] | None = None) -> None:
    """Refuse a model whose weights need a GPU family the host lacks, naming the models that fit.

    gpus: (name, compute capability "8.6", (8, 6)) for each GPU of the host."""
    sms = [sm for _, _, sm in gpus]
    if fits_family(model, sms):
        return
    catalogue = catalogue if catalogue is not None else load_catalogue()
    fitting = [key for key, spec in catalogue.items() if fits_family(spec, sms)]
    names = ", ".join(sorted({f"{name} ({cap})" for name, cap, _ in gpus}))
    raise LaunchError(
        subject="VL_MODEL", value=model.key,
        problem=f"VL_MODEL={model.key} needs {GPU_FAMILIES[model.gpu_family][1]} GPUs ({model.gpu_family_why}); "
                f"this host has {names}",
        fix=f"Models that fit this host: {', '.join(fitting)}.")
