"""Variants as data: `images/common.toml` holds what every variant shares, `images/<name>.toml` one host family.

A variant file may override any key of the shared `[stack]` table under its own `[stack]`;
variants whose resolved stacks are equal build FROM the same stack image (see docs/design.md).
"""

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from prebake.errors import PrebakeError
from prebake.kernels import check_modules
from prebake.references import reference_problem
from prebake.schema import Key, check_table
from prebake.source import url_problem
from prebake.tomlfile import read_toml

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_IMAGES_DIR = REPO_ROOT / "images"
COMMON_FILE = "common.toml"
VARIANT_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
REST_LAYER = "rest"  # the stack's last Python layer: every locked package no python_layers group takes

# Steps a build may leave out (`--without`), and why one would.
OPTIONAL_STEPS = {
    "cuda-compat": "the CUDA forward-compatibility libraries, which need NVIDIA's apt repository",
}

STACK_KEYS = {
    "base": Key("str", "an image reference pinned by digest, like 'ubuntu:24.04@sha256:<64 hex digits>'"),
    "python_version": Key("str", "the base image's Python as MAJOR.MINOR, like '3.12'"),
    "os_packages": Key("str-list", "a list of OS package names, like ['tini', 'python3.12-venv']"),
    "cuda": Key("str", "the CUDA release of the toolchain wheels and compat libraries, like '13.0'"),
    "cuda_compat": Key("bool", "true or false: bake cuda-compat-<cuda> from NVIDIA's apt repository"),
    "installer": Key("str", "the pinned installer requirement, like 'uv==0.13.9' (it must be in the lock)"),
    "requirements": Key("str-list", "the Python requirements resolved into the lock, like ['vllm==0.27.1']"),
    "lock": Key("str", "the lock file's path relative to the images folder, like 'locks/cu13-py312.txt'"),
    "python_layers": Key("list-table", "a table of layer name -> package name patterns, like "
                         "{cuda = ['nvidia-*'], torch = ['torch', 'triton']}", required=False),
}
COMMON_KEYS = {
    "image_name": Key("str", "the image repository name, like 'prebake'"),
    "source_url": Key("str", "the project's source URL, for the OCI source label (PREBAKE_SOURCE_URL overrides it)"),
    "stack": Key("table", "the [stack] table"),
    "launch": Key("str-table", "a table of VL_* launch defaults", required=False),
}
VARIANT_KEYS = {
    "description": Key("str", "a one-line description of the host family"),
    "gpus": Key("str-list", "the GPU names of this host family, as nvidia-smi prints them"),
    "cuda_arch": Key("str", "the GPUs' compute capability, like '8.6'"),
    "host": Key("table", "the [host] table", required=False),
    "launch": Key("str-table", "a table of VL_* launch defaults, like {VL_MODEL = 'ornith'}", required=False),
    "stack": Key("table", "a [stack] table overriding keys of common.toml's [stack]", required=False),
    "flashinfer_aot": Key("str-list", "the FlashInfer modules this variant's GPUs and models use, compiled at build "
                          "for its cuda_arch only (templates/files/flashinfer_aot.py), like ['sampling']",
                          required=False),
}
HOST_KEYS = {
    "nccl": Key("str-table", "a table of NCCL settings written to /etc/nccl.conf, like {NCCL_P2P_DISABLE = 1}",
                required=False),
    "env": Key("str-table", "a table of environment variables baked into the image", required=False),
}


@dataclass(frozen=True)
class Stack:
    """The heavy, host-independent part of an image: OS, compat libraries, the locked Python set."""

    base: str
    python_version: str
    os_packages: tuple[str, ...]
    cuda: str
    cuda_compat: bool
    installer: str
    requirements: tuple[str, ...]
    lock: Path
    # The lock's packages installed one layer per group, in this order (most stable and biggest
    # first); what no pattern matches goes in a last layer, REST_LAYER: vLLM and its own pins.
    python_layers: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def python(self) -> str:
        return f"python{self.python_version}"

    @property
    def has_cuda_toolchain(self) -> bool:
        # nvcc asked for directly, or through the cuda-toolkit meta-package's extra
        return any(re.match(r"nvidia-cuda-nvcc\b|cuda-toolkit\[[^\]]*\bnvcc\b", r) for r in self.requirements)

    def without(self, steps: tuple[str, ...]) -> "Stack":
        stack = self
        for step in steps:
            if step == "cuda-compat":
                stack = dataclasses.replace(stack, cuda_compat=False)
        return stack


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    gpus: tuple[str, ...]
    cuda_arch: str
    nccl: Mapping[str, str]
    env: Mapping[str, str]
    launch_defaults: Mapping[str, str]
    stack: Stack
    image_name: str
    source_url: str
    path: Path
    stack_source: Path  # the file whose [stack] this variant uses: common.toml, or its own when it overrides
    # FlashInfer modules compiled for cuda_arch alone, in a kernels image FROM the stack (prebake/kernels.py)
    flashinfer_aot: tuple[str, ...] = ()

    def optional_steps(self) -> tuple[str, ...]:
        return ("cuda-compat",) if self.stack.cuda_compat else ()


# Values reach the Dockerfiles, some as whole words (ENV names, apt package names, comments): a line
# break there would start a new instruction. C0/C1 controls, DEL and Unicode line breaks are refused.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OS_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]*(?:[=:][A-Za-z0-9+.:~-]+)?")


def _check_plain_text(path: Path, data: Any, where: str = "") -> None:
    """No key, table name or string value holds a control character or line break, at any depth."""
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        dotted = f"{where}.{key}" if where and isinstance(key, str) else where + f"[{key}]" if where else str(key)
        if isinstance(key, str) and _CONTROL.search(key):
            char = _CONTROL.search(key).group()
            raise PrebakeError(f"{path}: the key or table name {dotted!r} holds the control character U+{ord(char):04X}: "
                               "it would change the rendered Dockerfile's structure; use a plain name")
        if isinstance(value, str) and _CONTROL.search(value):
            char = _CONTROL.search(value).group()
            raise PrebakeError(f"{path}: key '{dotted}' holds the control character U+{ord(char):04X} (a line break or "
                               "other control): it would change the rendered Dockerfile's structure; remove it")
        _check_plain_text(path, value, dotted)


def _strings(table: Mapping[str, Any]) -> Mapping[str, str]:
    return MappingProxyType({k: str(v) for k, v in table.items()})


def _check_launch(path: Path, table: Mapping[str, Any]) -> None:
    for key in table:
        if not re.fullmatch(r"VL_[A-Z0-9_]+", key):
            raise PrebakeError(f"{path}: key 'launch.{key}' is not a VL_* variable; launch defaults are VL_* knobs "
                               "read by the entrypoint (docs/entrypoint.md lists them)")


def _load_stack(path: Path, images_dir: Path, table: Mapping[str, Any]) -> Stack:
    check_table(path, "stack", table, STACK_KEYS)
    if not re.fullmatch(r".+@sha256:[0-9a-f]{64}", table["base"]):
        raise PrebakeError(f"{path}: key 'stack.base' must be pinned by digest, like "
                           f"'ubuntu:24.04@sha256:<64 hex digits>'; got {table['base']!r}")
    if reference_problem(table["base"]):
        raise PrebakeError(f"{path}: key 'stack.base' is not an image reference: {reference_problem(table['base'])}")
    if not re.fullmatch(r"\d+\.\d+", table["python_version"]):
        raise PrebakeError(f"{path}: key 'stack.python_version' must be MAJOR.MINOR like '3.12'")
    if not re.fullmatch(r"\d+\.\d+", table["cuda"]):
        raise PrebakeError(f"{path}: key 'stack.cuda' must be a CUDA release MAJOR.MINOR like '13.0', got {table['cuda']!r}")
    for package in table["os_packages"]:
        if not _OS_PACKAGE.fullmatch(package):
            raise PrebakeError(f"{path}: key 'stack.os_packages' holds {package!r}, not a Debian package name (lower-case "
                               "letters, digits, + . -, optionally =VERSION)")
    lock = images_dir / table["lock"]
    layers = table.get("python_layers", {})
    for name, patterns in layers.items():
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) or name == REST_LAYER:
            raise PrebakeError(f"{path}: key 'stack.python_layers.{name}': a layer name is lower-case letters, "
                               f"digits and dashes, and not '{REST_LAYER}' (the last layer, for what no group takes)")
        if not patterns:
            raise PrebakeError(f"{path}: key 'stack.python_layers.{name}' lists no package; give name patterns "
                               "like ['nvidia-*'] or remove the layer")
    return Stack(
        base=table["base"], python_version=table["python_version"], os_packages=tuple(table["os_packages"]),
        cuda=table["cuda"], cuda_compat=table["cuda_compat"], installer=table["installer"],
        requirements=tuple(table["requirements"]), lock=lock,
        python_layers=tuple((name, tuple(patterns)) for name, patterns in layers.items()),
    )


def _load_variant(path: Path, images_dir: Path, common: Mapping[str, Any]) -> Variant:
    data = read_toml(path)
    _check_plain_text(path, data)
    check_table(path, "", data, VARIANT_KEYS)
    host = data.get("host", {})
    check_table(path, "host", host, HOST_KEYS)
    for name in host.get("env", {}):
        if not _ENV_NAME.fullmatch(name):
            raise PrebakeError(f"{path}: key 'host.env.{name}' is not an environment variable name (letters, digits "
                               "and _, not starting with a digit)")
    launch = data.get("launch", {})
    _check_launch(path, launch)
    overrides = data.get("stack", {})
    check_table(path, "stack", overrides, STACK_KEYS, all_optional=True)
    if not re.fullmatch(r"\d+\.\d+", data["cuda_arch"]):
        raise PrebakeError(f"{path}: key 'cuda_arch' must be a compute capability like '8.6', "
                           f"got {data['cuda_arch']!r}")
    check_modules(path, data.get("flashinfer_aot", []), data["cuda_arch"])
    stack_source = path if overrides else images_dir / COMMON_FILE
    stack = _load_stack(stack_source, images_dir, {**common["stack"], **overrides})
    return Variant(
        name=path.stem, description=data["description"], gpus=tuple(data["gpus"]), cuda_arch=data["cuda_arch"],
        nccl=_strings(host.get("nccl", {})), env=_strings(host.get("env", {})),
        launch_defaults=_strings({**common.get("launch", {}), **launch}),
        stack=stack, image_name=common["image_name"], source_url=common["source_url"], path=path,
        stack_source=stack_source, flashinfer_aot=tuple(data.get("flashinfer_aot", ())),
    )


def _load_common(images_dir: Path) -> dict[str, Any]:
    path = images_dir / COMMON_FILE
    if not path.is_file():
        raise PrebakeError(f"{path}: file not found; the images folder must hold {COMMON_FILE} "
                           "with the values every variant shares")
    data = read_toml(path)
    _check_plain_text(path, data)
    check_table(path, "", data, COMMON_KEYS)
    if not isinstance(data["stack"], dict):
        raise PrebakeError(f"{path}: 'stack' must be a table ([stack])")
    _check_launch(path, data.get("launch", {}))
    if url_problem(data["source_url"]):
        raise PrebakeError(f"{path}: key 'source_url': {url_problem(data['source_url'])}")
    _load_stack(path, images_dir, data["stack"])  # validate the shared stack even if every variant overrides it
    return data


def load_variants(images_dir: Path | None = None) -> dict[str, Variant]:
    """Load and validate every variant of `images_dir`, sorted by name."""
    images_dir = images_dir or DEFAULT_IMAGES_DIR
    if images_dir.exists() and not images_dir.is_dir():
        raise PrebakeError(f"{images_dir}: is a file, not a folder; --images-dir names the folder that holds "
                           f"{COMMON_FILE} and the variants' <name>.toml files")
    if not images_dir.is_dir():
        raise PrebakeError(f"{images_dir}: no such images folder")
    common = _load_common(images_dir)
    variants = {}
    for path in sorted(images_dir.glob("*.toml")):
        if path.name == COMMON_FILE:
            continue
        if not VARIANT_NAME.match(path.stem):
            raise PrebakeError(f"{path}: a variant's file name must be lower-case letters, digits and dashes")
        variants[path.stem] = _load_variant(path, images_dir, common)
    if not variants:
        raise PrebakeError(f"{images_dir}: no variant files (<name>.toml beside {COMMON_FILE})")
    return variants


def get_variant(name: str, images_dir: Path | None = None) -> Variant:
    variants = load_variants(images_dir)
    if name not in variants:
        raise PrebakeError(f"unknown variant '{name}'; known variants: {', '.join(variants)} "
                           f"(each is a file in {images_dir or DEFAULT_IMAGES_DIR})")
    return variants[name]
