"""Which libcuda.so.1 the dynamic loader will really give vLLM, and why.

The container runtime may enable the image's CUDA compat libraries by itself, whatever the
launcher decides (NVIDIA Container Toolkit, read in nvidia-container-toolkit
cmd/nvidia-cdi-hook/cudacompat/ and libnvidia-container src/cli/compat_mode.c):
  hook mode (CDI, the `nvidia` runtime's default since 1.18): when the compat libcuda is newer than
    the host driver, writes /etc/ld.so.conf.d/00-compat-<uuid>.conf naming the compat folder, then
    runs ldconfig: the compat libcuda comes first in /etc/ld.so.cache.
  ldconfig mode (legacy default): the compat folder is an argument of the ldconfig it runs: first
    in the cache, no conf file left behind.
  mount mode (older legacy default): the compat libraries are bind-mounted beside the host's
    driver libraries, and libcuda.so.1 there points at the compat version.
All three end in what ld.so reads: LD_LIBRARY_PATH first, then the cache, so reading those two
says what vLLM will load, whichever mode (or none) the host used.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import Mapping

from .report import Decision

LIBCUDA = "libcuda.so.1"
LD_CACHE = "/etc/ld.so.cache"
LD_SO_CONF = "/etc/ld.so.conf"
COMPAT_CONF_GLOB = "00-compat-*.conf"  # the enable-cuda-compat hook's file name
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_OLD_MAGIC = b"ld.so-1.7.0"
# ld.so only takes cache entries of its own ABI: libc6 ELF (0x03) plus the machine's bits.
_ABI_FLAGS = {"x86_64": 0x0303, "aarch64": 0x0A03}
_VERSIONED = re.compile(r"^(lib[\w.+-]*?\.so)\.(\d+\.\d+(?:\.\d+)*)$")


class LdCacheError(ValueError):
    pass


@dataclass(frozen=True)
class Library:
    path: str  # as the loader finds it, e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1
    real_path: str  # the file it ends at, e.g. .../libcuda.so.570.195.03
    via: str  # "LD_LIBRARY_PATH" or "ld cache (/etc/ld.so.cache)"

    @property
    def version(self) -> str | None:
        match = _VERSIONED.match(os.path.basename(self.real_path))
        return match.group(2) if match else None

    @property
    def folder(self) -> str:
        return os.path.dirname(self.path)


@dataclass(frozen=True)
class LoaderView:
    libcuda: Library | None  # what ld.so will load, None when nothing provides libcuda.so.1
    cache_entries: tuple[str, ...]  # every libcuda.so.1 of the cache, in the loader's order
    compat_confs: tuple[tuple[str, tuple[str, ...]], ...]  # (00-compat-*.conf file, folders it names)
    cache_path: str
    cache_error: str | None = None


def read_ld_cache(path: str) -> list[tuple[int, str, str]]:
    """(flags, soname, path) of every entry of a glibc ld.so.cache, in file order (ld.so's order)."""
    with open(path, "rb") as handle:
        data = handle.read()
    start = data.find(_NEW_MAGIC)
    if start < 0:
        raise LdCacheError(f"{path} is not a glibc ld.so.cache (no {_NEW_MAGIC.decode()} header)")
    if start and not data.startswith(_OLD_MAGIC):
        raise LdCacheError(f"{path}: unexpected data before the {_NEW_MAGIC.decode()} header")
    try:
        count, _strings_len = struct.unpack_from("<II", data, start + len(_NEW_MAGIC))
        entries = []
        for number in range(count):
            flags, key, value, _os, _hwcap = struct.unpack_from("<iIIIQ", data, start + 48 + 24 * number)
            entries.append((flags, _cstring(data, start + key), _cstring(data, start + value)))
    except (struct.error, ValueError, UnicodeDecodeError) as err:
        raise LdCacheError(f"{path} is truncated or corrupt ({err})") from None
    return entries


def _cstring(data: bytes, offset: int) -> str:
    end = data.index(b"\0", offset)
    return data[offset:end].decode()


def read_compat_confs(ld_so_conf: str) -> list[tuple[str, tuple[str, ...]]]:
    """The enable-cuda-compat hook's drop-ins beside ld.so.conf, with the folders they name."""
    found = []
    folder = os.path.join(os.path.dirname(ld_so_conf), "ld.so.conf.d")
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return found
    prefix, suffix = COMPAT_CONF_GLOB.split("*")
    for conf in (os.path.join(folder, n) for n in names if n.startswith(prefix) and n.endswith(suffix)):
        try:
            with open(conf, encoding="utf-8", errors="replace") as handle:
                folders = tuple(line.strip() for line in handle if line.strip() and not line.startswith("#"))
        except OSError:
            continue
        found.append((conf, folders))
    return found


def _abi_flags() -> int | None:
    return _ABI_FLAGS.get(os.uname().machine)


def find_in_path(name: str, library_path: str) -> str | None:
    for folder in library_path.split(":"):
        candidate = os.path.join(folder or ".", name)
        if folder and os.path.exists(candidate):
            return candidate
    return None


def view(env: Mapping[str, str], library_path: str, cache_path: str = LD_CACHE,
         ld_so_conf: str = LD_SO_CONF) -> LoaderView:
    """What ld.so would load for libcuda.so.1 with `library_path` as LD_LIBRARY_PATH."""
    entries, error = [], None
    try:
        abi = _abi_flags()
        entries = [path for flags, name, path in read_ld_cache(cache_path)
                   if name == LIBCUDA and (abi is None or flags == abi)]
    except FileNotFoundError:
        error = f"{cache_path} does not exist"
    except (OSError, LdCacheError) as err:
        error = str(err)
    confs = tuple(read_compat_confs(ld_so_conf))
    library = None
    from_path = find_in_path(LIBCUDA, library_path)
    if from_path:
        library = Library(from_path, os.path.realpath(from_path), "LD_LIBRARY_PATH")
    else:
        for path in entries:
            if os.path.exists(path):
                library = Library(path, os.path.realpath(path), f"ld cache ({cache_path})")
                break
    return LoaderView(library, tuple(entries), confs, cache_path, error)


def host_driver_links(view_: LoaderView, driver_version: str, shadowing: Library) -> dict[str, str]:
    """soname -> the host driver's file, for every driver library the compat folder shadows.

    The compat folder holds libcuda with its companions (libnvidia-ptxjitcompiler, -nvvm,
    libcudadebugger) as soname links to one version: each gets the host's file of the same
    library, found beside the host's libcuda.so.<driver version>."""
    host_files = []
    for entry in (*view_.cache_entries, shadowing.path):
        folder = os.path.dirname(entry)
        candidate = os.path.join(folder, f"libcuda.so.{driver_version}")
        if os.path.isfile(candidate):
            host_files.append(folder)
    if not host_files:
        return {}
    host_folder = host_files[0]
    compat_version = shadowing.version
    links = {}
    for name in sorted(os.listdir(shadowing.folder)):
        link = os.path.join(shadowing.folder, name)
        target = os.path.basename(os.path.realpath(link))
        match = _VERSIONED.match(target)
        if not os.path.islink(link) or not match or match.group(2) != compat_version or name == target:
            continue
        host_file = os.path.join(host_folder, f"{match.group(1)}.{driver_version}")
        if re.fullmatch(r"lib[\w.+-]*\.so\.\d+", name) and os.path.isfile(host_file):
            links[name] = host_file
    return links


def exec_folder(env: Mapping[str, str], name: str) -> str:
    """A folder of the launcher's own under TMPDIR, for links created just before the exec."""
    return os.path.join(env.get("TMPDIR") or "/tmp", name)


def make_links(links: Mapping[str, str]) -> None:
    """Create (or replace) the symbolic links of a plan: path -> target."""
    for path, target in links.items():
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.lexists(path):
            os.unlink(path)
        os.symlink(target, path)


# --- `-lcuda` for the kernels compiled on the pod, against the libcuda vLLM really loads.
# FlashInfer links every module it compiles at run time with `-L$CUDA_HOME/lib64/stubs -lcuda`
# (flashinfer/jit/cpp_ext.py). The linker wants the unversioned `libcuda.so`: the CUDA wheels
# ship no stubs folder, and the NVIDIA container runtime mounts `libcuda.so.1` and its versioned
# file but makes the unversioned link only in some of its modes, so on such a host every module
# FlashInfer compiles fails with "ld: cannot find -lcuda". The launcher links `libcuda.so` to the
# library the loader will give vLLM (host driver or compat, compat.py) in a folder of its own,
# first on LIBRARY_PATH, which gcc and nvcc's host linker search before their default folders.
# Triton links with `-l:libcuda.so.1` and needs none of this.
LINK_FOLDER = "prebake-link"


def libcuda_for_linking(libcuda: str | None, env: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str], Decision]:
    """(links to create at exec, environment changes, the decision) for a libcuda.so.1 at `libcuda`."""
    if libcuda is None:
        return {}, {}, Decision("linker", "unchanged", "no libcuda.so.1 in this container (no GPU driver mounted): "
                                                       "nothing for -lcuda to link against")
    folder = exec_folder(env, LINK_FOLDER)
    link = os.path.join(folder, "libcuda.so")
    current = [part for part in env.get("LIBRARY_PATH", "").split(":") if part]
    value = ":".join([folder, *(part for part in current if part != folder)])
    return {link: libcuda}, {"LIBRARY_PATH": value}, Decision(
        "linker", f"-lcuda links against {libcuda}",
        f"{link} -> {libcuda}, first on LIBRARY_PATH (created at exec): FlashInfer links the modules it compiles "
        "on the pod with -lcuda, and the runtime does not always make the unversioned libcuda.so")
