"""The REAL launcher command line against fake hosts.

A Launcher gives each run a marker file, a fake nvidia-smi for a host profile of tests/fixtures/hosts/, an
empty HF_HOME and an environment with no stray VL_*.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import REPO
from .net import free_port

ROOT = REPO
LAUNCH = REPO / "entrypoint" / "launch.py"
HOSTS = REPO / "tests" / "fixtures" / "hosts"
FAKE_SMI = HOSTS / "fake_nvidia_smi.py"  # the self-test ships it too (prebake/selftest.py)
REAL_H200 = REPO / "tests" / "fixtures" / "real-h200"


def make_fake_nvidia_smi(folder: Path, profile: str) -> Path:
    """An executable `nvidia-smi` for one host profile (a wrapper, so that no env var is needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        f"FAKE_NVIDIA_SMI_HOST='{HOSTS / (profile + '.json')}' exec '{sys.executable}' -S '{FAKE_SMI}' \"$@\"\n"
    )
    script.chmod(0o755)
    return script


def write_marker(path: Path, compat_dir: str | None, launch_defaults: dict | None = None, **extra) -> Path:
    data = {"schema": 1, "variant": "a40", "vllm": "0.27.1", "torch": "2.13.0", "cuda": "13.0",
            "python": "3.12", "base_image": "debian:bookworm", "stack_image": "", "revision": "test",
            "created": "2026-11-30T00:00:00Z", "cuda_arch": "8.6", "cuda_compat_dir": compat_dir,
            "launch_defaults": launch_defaults if launch_defaults is not None else {"VL_MODEL": "ornith", "VL_FLASHINFER": "off"}}
    data.update(extra)
    path.write_text(json.dumps(data))
    return path


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    plan: dict = field(default_factory=dict)

    @property
    def argv(self) -> list[str]:
        return self.plan["argv"]

    @property
    def env(self) -> dict:
        return self.plan["env"]

    def option(self, flag: str) -> list[str] | None:
        """Values of an option in argv (up to the next --flag); None when absent."""
        argv = self.argv
        if argv.count(flag) > 1:
            raise AssertionError(f"{flag} appears {argv.count(flag)} times in {argv}")
        if flag not in argv:
            return None
        values = []
        for token in argv[argv.index(flag) + 1:]:
            if token.startswith("--"):
                break
            values.append(token)
        return values

    def decision(self, topic: str) -> list[dict]:
        return [d for d in self.plan["decisions"] if d["topic"] == topic]


A40 = {"name": "NVIDIA A40", "memory_total_mib": 46068, "compute_cap": "8.6"}


def custom_host(launcher: "Launcher", gpus: list[dict], driver: str = "580.95.05") -> str:
    """A fake nvidia-smi for a host profile written here; returns its path (for VL_NVIDIA_SMI)."""
    folder = launcher.tmp / "custom-host"
    folder.mkdir(exist_ok=True)
    profile = folder / "host.json"
    profile.write_text(json.dumps({"driver_version": driver, "gpus": gpus}))
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\nFAKE_NVIDIA_SMI_HOST='{profile}' exec '{sys.executable}' -S '{FAKE_SMI}' \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def assert_clear_error(result: "Result", code: int, *needles: str) -> None:
    """The launcher stopped with `code` and a clear error: the error line first, no traceback, nothing on stdout,
    every needle in it."""
    assert result.rc == code, (result.rc, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    # A real start names the image first; then the error is the first line.
    assert re.match(r"(\S+ \[prebake\] image prebake [^\n]*\n)?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \[prebake\] error: ",
                    result.stderr), result.stderr
    assert result.stdout == ""
    for needle in needles:
        assert needle in result.stderr, (needle, result.stderr)


def exec_ports() -> dict[str, str]:
    """VL_PORT and VL_INTERNAL_PORT on free ports: a real exec (no --dry-run) checks that both are free,
    and this machine may run something on the defaults (8080, 18081)."""
    return {"VL_PORT": str(free_port()), "VL_INTERNAL_PORT": str(free_port())}


class Launcher:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.compat_dir = tmp_path / "cuda-13.0" / "compat"
        self.compat_dir.mkdir(parents=True)
        self.marker = write_marker(tmp_path / "image_prebaked", str(self.compat_dir))
        self.hf_home = tmp_path / "hf"

    def base_env(self, profile: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VL_", "HF_", "HUGGINGFACE_", "VLLM_")) and k != "LD_LIBRARY_PATH"}
        env.update({"HOME": str(self.tmp / "home"), "HF_HOME": str(self.hf_home),
                    "VL_PREBAKED_MARKER": str(self.marker),
                    "VL_NVIDIA_SMI": str(make_fake_nvidia_smi(self.tmp / "bin", profile))})
        return env

    def run(self, profile: str = "a40x2_570", env: dict | None = None, args: list[str] = (),
            dry_run: bool = True) -> Result:
        full_env = self.base_env(profile)
        full_env.update(env or {})
        command = [sys.executable, str(LAUNCH), *(["--dry-run"] if dry_run else []), *args]
        done = subprocess.run(command, env=full_env, capture_output=True, text=True, timeout=60)
        result = Result(done.returncode, done.stdout, done.stderr)
        if dry_run and done.returncode == 0:
            result.plan = json.loads(done.stdout)  # exactly one JSON object, or this raises
        return result

    def plan(self, *args, **kwargs) -> Result:
        result = self.run(*args, **kwargs)
        assert result.rc == 0, result.stderr
        return result


def fake_nvidia_smi_for_image(folder: Path, profile: str) -> Path:
    """A folder to mount at /opt/fake: an nvidia-smi that prints what a real one prints for `profile`."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(FAKE_SMI, folder)
    shutil.copy(HOSTS / f"{profile}.json", folder / "host.json")
    script = folder / "nvidia-smi"
    script.write_text("#!/bin/sh\nFAKE_NVIDIA_SMI_HOST=/opt/fake/host.json exec /opt/venv/bin/python -S "
                      "/opt/fake/fake_nvidia_smi.py \"$@\"\n")
    script.chmod(0o755)
    return folder
