"""Install a pure-Python plugin folder (pyproject.toml + one package) into a venv as a wheel.

Used at image build: `python install_plugin.py DIR` with the venv's python builds the wheel
with the standard library alone (no build backend to fetch, so it works offline) and installs
it with that python's pip, which records it like any other distribution (entry points included).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import subprocess
import sys
import tempfile
import tomllib
import zipfile


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def build_wheel(source: str, out_dir: str) -> str:
    with open(os.path.join(source, "pyproject.toml"), "rb") as f:
        pyproject = tomllib.load(f)
    project, packages = pyproject["project"], pyproject["tool"]["setuptools"]["packages"]
    name, version = project["name"], project["version"]
    stem = f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}"
    info = f"{stem}.dist-info"
    files: dict[str, bytes] = {}
    for package in packages:
        folder = os.path.join(source, package)
        for entry in sorted(os.listdir(folder)):
            if entry.endswith(".py"):
                with open(os.path.join(folder, entry), "rb") as f:
                    files[f"{package}/{entry}"] = f.read()
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 f"Summary: {project.get('description', '')}\n").encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: prebake install_plugin.py\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entry_points = "".join(f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in items.items()) + "\n"
                           for group, items in project.get("entry-points", {}).items())
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for path, data in files.items():
        writer.writerow([path, _hash(data), len(data)])
    writer.writerow([f"{info}/RECORD", "", ""])
    files[f"{info}/RECORD"] = record.getvalue().encode()
    wheel = os.path.join(out_dir, f"{stem}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in files.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return wheel


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python install_plugin.py PLUGIN_DIR", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as out:
        wheel = build_wheel(argv[0], out)
        return subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                               "--no-cache-dir", "--force-reinstall", "--disable-pip-version-check", wheel]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
