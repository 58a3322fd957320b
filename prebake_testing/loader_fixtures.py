"""A container's loader state as each NVIDIA Container Toolkit mode leaves it, built for real.

Driver libraries are tiny real shared objects (gcc, with the sonames of the real ones) that
answer `prebake_libcuda()` with which copy they are; the ld cache is written by the real
ldconfig from an ld.so.conf, exactly as the toolkit's hooks run it (they run ldconfig in the
container with -f /etc/ld.so.conf -C /etc/ld.so.cache). What each mode does, from the sources
(nvidia-container-toolkit cmd/nvidia-cdi-hook/cudacompat/cudacompat.go, internal/ldconfig;
libnvidia-container src/cli/compat_mode.c, src/nvc_ldcache.c):

  hook      /etc/ld.so.conf.d/00-compat-<uuid>.conf holding the compat folder (symlinks
            resolved), then ldconfig over /etc/ld.so.conf
  ldconfig  the compat folder given to ldconfig on its command line, no file left behind
  mount     the compat libraries bind-mounted beside the host's in the driver folder, so that
            ldconfig points libcuda.so.1 there at the (newer) compat version
  disabled  nothing: only the host's driver libraries
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

MODES = ("hook", "ldconfig", "mount", "disabled")
# soname of each driver library the compat folder carries (cuda-compat-13-0's contents)
DRIVER_LIBS = {"libcuda.so": "libcuda.so.1", "libnvidia-ptxjitcompiler.so": "libnvidia-ptxjitcompiler.so.1",
               "libnvidia-nvvm.so": "libnvidia-nvvm.so.4", "libcudadebugger.so": "libcudadebugger.so.1"}
SYSTEM_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/local/lib")
LDCONFIG = shutil.which("ldconfig") or "/sbin/ldconfig"


def have_tools() -> bool:
    return shutil.which("gcc") is not None and os.path.exists(LDCONFIG)


def build_library(path: Path, soname: str, tag: str) -> None:
    source = path.with_suffix(".c")
    source.write_text(f'const char *prebake_libcuda(void) {{ return "{tag}"; }}\n')
    subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(path), str(source)], check=True)
    source.unlink()


def install_driver(folder: Path, version: str, tag: str, libs=DRIVER_LIBS) -> None:
    """Versioned files plus the soname links ldconfig would make (lib*.so.1 -> lib*.so.<version>)."""
    folder.mkdir(parents=True, exist_ok=True)
    for base, soname in libs.items():
        build_library(folder / f"{base}.{version}", soname, f"{tag}:{base}")
        link = folder / soname
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(f"{base}.{version}")


@dataclass
class ContainerRoot:
    root: Path
    driver_dir: Path  # where the toolkit mounts the host's driver libraries
    compat_dir: Path  # the image's cuda-compat folder
    host_version: str
    compat_version: str

    @property
    def ld_so_conf(self) -> Path:
        return self.root / "etc" / "ld.so.conf"

    @property
    def ld_cache(self) -> Path:
        return self.root / "etc" / "ld.so.cache"

    def env(self) -> dict[str, str]:
        return {"VL_LD_CACHE": str(self.ld_cache), "VL_LD_SO_CONF": str(self.ld_so_conf)}


def make_root(base: Path, mode: str, host_version: str, compat_version: str, compat_dir: Path | None = None,
              host_libs=None) -> ContainerRoot:
    assert mode in MODES
    driver_dir = base / "usr" / "lib" / "x86_64-linux-gnu"
    compat_dir = compat_dir or base / "usr" / "local" / "cuda-13.0" / "compat"
    host_libs = host_libs or {k: v for k, v in DRIVER_LIBS.items() if k != "libcudadebugger.so"}
    install_driver(driver_dir, host_version, f"host-{host_version}", host_libs)
    install_driver(compat_dir, compat_version, f"compat-{compat_version}")
    conf_d = base / "etc" / "ld.so.conf.d"
    conf_d.mkdir(parents=True, exist_ok=True)
    (base / "etc" / "ld.so.conf").write_text(f"include {conf_d}/*.conf\n")
    (conf_d / "x86_64-linux-gnu.conf").write_text("\n".join((str(driver_dir), *SYSTEM_DIRS)) + "\n")
    extra = []
    if mode == "hook":
        (conf_d / f"00-compat-{uuid.uuid4()}.conf").write_text(f"{os.path.realpath(compat_dir)}\n")
    elif mode == "ldconfig":
        extra = [str(compat_dir)]
    elif mode == "mount":
        for base_name in DRIVER_LIBS:
            source = compat_dir / f"{base_name}.{compat_version}"
            shutil.copy(source, driver_dir / source.name)
            link = driver_dir / DRIVER_LIBS[base_name]
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(source.name)  # ldconfig links the soname to the newest version
    # -X: leave the links as made above (and never touch the real system folders' links)
    subprocess.run([LDCONFIG, "-X", "-f", str(base / "etc" / "ld.so.conf"), "-C", str(base / "etc" / "ld.so.cache"),
                    *extra], check=True, capture_output=True)
    return ContainerRoot(base, driver_dir, compat_dir, host_version, compat_version)


def ldconfig_print(cache: Path) -> list[str]:
    """libcuda.so.1 paths as the real `ldconfig -p` prints them, in order."""
    done = subprocess.run([LDCONFIG, "-p", "-C", str(cache)], capture_output=True, text=True, check=True)
    return [line.split("=>", 1)[1].strip() for line in done.stdout.splitlines()
            if line.strip().startswith("libcuda.so.1 ")]
