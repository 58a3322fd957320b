"""What the loader will load, against what the launcher decided: every container-toolkit mode.

The fixtures (prebake_testing/loader_fixtures.py) are real shared objects and real ld caches written by the
real ldconfig as the toolkit runs it. Dry runs read them through VL_LD_CACHE / VL_LD_SO_CONF;
the exec tests bind-mount them over /etc in a private mount namespace and let the real ld.so
load a stand-in vLLM's libcuda.so.1.
"""

import json
import os
import shutil
import stat
import subprocess
import sys

import pytest

from prebake_testing import loader_fixtures as fx
from prebake_testing.hosts import LAUNCH, exec_ports
from entrypoint.launcher.loader import LdCacheError, read_ld_cache

pytestmark = pytest.mark.skipif(not fx.have_tools(), reason="needs gcc and ldconfig to build the fixtures")
COMPAT_1300 = "580.95.05"  # cuda-compat-13-0 of nvidia/cuda:13.0.2
COMPAT_NEWER = "590.44.01"  # a newer compat (the toolkit's own test data) over a 580 host
RUNTIME_GIVES_COMPAT = ("hook", "ldconfig", "mount")


def decision(result, prefix):
    found = [d for d in result.decision("loader") if d["decision"].startswith(prefix)]
    assert len(found) == 1, result.decision("loader")
    return found[0]


@pytest.mark.parametrize("mode", fx.MODES)
def test_cache_reader_matches_the_real_ldconfig(tmp_path, mode):
    root = fx.make_root(tmp_path, mode, "570.195.03", COMPAT_1300)
    mine = [path for _, name, path in read_ld_cache(str(root.ld_cache)) if name == "libcuda.so.1"]
    assert mine == fx.ldconfig_print(root.ld_cache)
    assert len(mine) == (2 if mode in ("hook", "ldconfig") else 1)


def test_cache_reader_refuses_garbage(tmp_path):
    bad = tmp_path / "ld.so.cache"
    bad.write_bytes(b"not a cache at all")
    with pytest.raises(LdCacheError, match="not a glibc ld.so.cache"):
        read_ld_cache(str(bad))


@pytest.mark.parametrize("mode", fx.MODES)
def test_old_driver_gets_compat_whatever_the_runtime_did(launcher, tmp_path, mode):
    root = fx.make_root(tmp_path / "root", mode, "570.195.03", COMPAT_1300, compat_dir=launcher.compat_dir)
    result = launcher.plan("a40x2_570", env=root.env())
    assert result.env["LD_LIBRARY_PATH"] == str(launcher.compat_dir)
    before = decision(result, "without the launcher")
    expected = f"CUDA compat libcuda {COMPAT_1300}" if mode in RUNTIME_GIVES_COMPAT else "the host driver's libcuda 570.195.03"
    assert expected in before["decision"]
    if mode == "hook":
        assert "enable-cuda-compat hook wrote" in before["why"] and "00-compat-" in before["why"]
    after = decision(result, "vLLM loads")
    assert f"CUDA compat libcuda {COMPAT_1300}" in after["decision"] and "via LD_LIBRARY_PATH" in after["decision"]
    assert ("agrees with" in after["why"]) == (mode in ("hook", "ldconfig"))
    # no soname links to the host driver; only -lcuda's link, to the compat libcuda vLLM loads
    assert result.plan["links"] == {"/tmp/prebake-link/libcuda.so": str(launcher.compat_dir / "libcuda.so.1")}
    assert result.env["LIBRARY_PATH"] == "/tmp/prebake-link"


@pytest.mark.parametrize("mode", RUNTIME_GIVES_COMPAT)
def test_new_driver_gets_the_host_driver_when_the_runtime_enabled_compat(launcher, tmp_path, mode):
    root = fx.make_root(tmp_path / "root", mode, "580.159.04", COMPAT_NEWER, compat_dir=launcher.compat_dir)
    env = {**root.env(), "TMPDIR": str(tmp_path / "tmp")}
    result = launcher.plan("h200_580", env=env)
    assert result.decision("compat")[0]["decision"] == "off"
    assert f"CUDA compat libcuda {COMPAT_NEWER}" in decision(result, "without the launcher")["decision"]
    links_dir = tmp_path / "tmp" / "prebake-host-driver"
    assert result.env["LD_LIBRARY_PATH"] == str(links_dir)
    host = root.driver_dir
    assert result.plan["links"] == {
        str(links_dir / "libcuda.so.1"): str(host / "libcuda.so.580.159.04"),
        str(links_dir / "libnvidia-nvvm.so.4"): str(host / "libnvidia-nvvm.so.580.159.04"),
        str(links_dir / "libnvidia-ptxjitcompiler.so.1"): str(host / "libnvidia-ptxjitcompiler.so.580.159.04"),
        str(tmp_path / "tmp" / "prebake-link" / "libcuda.so"): str(links_dir / "libcuda.so.1"),
    }  # no libcudadebugger: the host's is not there, so it is left to the loader
    after = decision(result, "vLLM loads")
    assert "host driver's libcuda 580.159.04" in after["decision"] and f"compat {COMPAT_NEWER}" in after["why"]
    assert not links_dir.exists()  # a dry run creates nothing


def test_new_driver_with_nothing_enabled_changes_nothing(launcher, tmp_path):
    root = fx.make_root(tmp_path / "root", "disabled", "580.159.04", COMPAT_NEWER, compat_dir=launcher.compat_dir)
    result = launcher.plan("h200_580", env=root.env())
    assert "LD_LIBRARY_PATH" not in result.env
    assert result.plan["links"] == {"/tmp/prebake-link/libcuda.so": str(root.driver_dir / "libcuda.so.1")}
    assert "agrees with" in decision(result, "vLLM loads")["why"]


def test_library_path_naming_a_compat_folder_is_overridden_on_a_new_driver(launcher, tmp_path):
    root = fx.make_root(tmp_path / "root", "disabled", "580.159.04", COMPAT_NEWER)
    env = {**root.env(), "TMPDIR": str(tmp_path / "tmp"), "LD_LIBRARY_PATH": f"{root.compat_dir}:/usr/lib/extra"}
    result = launcher.plan("h200_580", env=env)
    before = decision(result, "without the launcher")
    assert f"compat libcuda {COMPAT_NEWER}" in before["decision"] and "via LD_LIBRARY_PATH" in before["decision"]
    links_dir = tmp_path / "tmp" / "prebake-host-driver"
    assert result.env["LD_LIBRARY_PATH"] == f"{links_dir}:{root.compat_dir}:/usr/lib/extra"


def test_unreadable_cache_is_reported_not_fatal(launcher, tmp_path):
    bad = tmp_path / "ld.so.cache"
    bad.write_bytes(b"\0" * 64)
    result = launcher.plan("h200_580", env={"VL_LD_CACHE": str(bad)})
    assert "ld cache unreadable" in decision(result, "without the launcher")["why"]


def test_geforce_on_an_old_driver_is_still_refused_when_the_runtime_enabled_compat(launcher, tmp_path):
    root = fx.make_root(tmp_path / "root", "hook", "550.127.05", COMPAT_1300, compat_dir=launcher.compat_dir)
    result = launcher.run("rtx4090_550", env=root.env())
    assert result.rc == 3 and "must be 580 or newer" in result.stderr and "GeForce RTX 4090" in result.stderr


# --- the real loader --------------------------------------------------------------------------

def write_stand_in_vllm(folder, body, record):
    """An executable `vllm` in `folder` running `body`, which fills `seen`, then writing it to `record`."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(f"#!{sys.executable}\nimport ctypes, json, os, subprocess, tempfile\nseen = {{}}\n"
                      f"{body}json.dump(seen, open({str(record)!r}, 'w'))\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def stand_in_vllm(folder, record):
    return write_stand_in_vllm(folder, (
        "for name in ('libcuda.so.1', 'libnvidia-ptxjitcompiler.so.1'):\n"
        "    answer = ctypes.CDLL(name).prebake_libcuda\n"
        "    answer.restype = ctypes.c_char_p\n"
        "    seen[name] = answer().decode()\n"
        "seen['maps'] = sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libcuda.so' in line})\n"),
        record)


def in_container_namespace(root, command, env):
    """Run `command` with the fixture's ld cache and ld.so.conf.d where ld.so reads them."""
    mount = ('mount --bind "$1" /etc/ld.so.cache && mount --bind "$2" /etc/ld.so.conf.d && shift 2 && exec "$@"')
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", mount, "sh",
                           str(root.ld_cache), str(root.root / "etc" / "ld.so.conf.d"), *command],
                          env=env, capture_output=True, text=True, timeout=60)


needs_root = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                                reason="a private mount namespace over /etc needs root and unshare")


@needs_root
def test_exec_loads_the_host_driver_where_the_runtime_enabled_a_newer_compat(launcher, tmp_path):
    root = fx.make_root(tmp_path / "root", "hook", "580.159.04", COMPAT_NEWER, compat_dir=launcher.compat_dir)
    record = tmp_path / "loaded.json"
    bin_dir = stand_in_vllm(tmp_path / "bin", record)
    env = launcher.base_env("h200_580")
    env.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path / "tmp"), **exec_ports()})
    control = in_container_namespace(root, [str(bin_dir / "vllm")], env)  # vLLM started without the launcher
    assert control.returncode == 0, control.stderr
    assert json.loads(record.read_text())["libcuda.so.1"] == f"compat-{COMPAT_NEWER}:libcuda.so"
    ran = in_container_namespace(root, [sys.executable, str(LAUNCH)], env)
    assert ran.returncode == 0, ran.stderr
    loaded = json.loads(record.read_text())
    assert loaded["libcuda.so.1"] == "host-580.159.04:libcuda.so"
    assert loaded["libnvidia-ptxjitcompiler.so.1"] == "host-580.159.04:libnvidia-ptxjitcompiler.so"
    assert loaded["maps"] == [str(root.driver_dir / "libcuda.so.580.159.04")]
    assert "loader: vLLM loads the host driver's libcuda 580.159.04" in ran.stderr


@needs_root
def test_exec_loads_compat_on_an_old_driver_whatever_the_runtime_did(launcher, tmp_path):
    root = fx.make_root(tmp_path / "root", "disabled", "570.195.03", COMPAT_1300, compat_dir=launcher.compat_dir)
    record = tmp_path / "loaded.json"
    bin_dir = stand_in_vllm(tmp_path / "bin", record)
    env = launcher.base_env("a40x2_570")
    env.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", **exec_ports()})
    control = in_container_namespace(root, [str(bin_dir / "vllm")], env)
    assert control.returncode == 0, control.stderr
    assert json.loads(record.read_text())["libcuda.so.1"] == "host-570.195.03:libcuda.so"
    ran = in_container_namespace(root, [sys.executable, str(LAUNCH)], env)
    assert ran.returncode == 0, ran.stderr
    loaded = json.loads(record.read_text())
    assert loaded["libcuda.so.1"] == f"compat-{COMPAT_1300}:libcuda.so"
    assert loaded["libnvidia-ptxjitcompiler.so.1"] == f"compat-{COMPAT_1300}:libnvidia-ptxjitcompiler.so"


def stand_in_vllm_compiling_a_module(folder, record):
    """A vLLM that compiles a kernel module on the pod the way FlashInfer does (cpp_ext.py: the
    module calls the driver, linked `-L$CUDA_HOME/lib64/stubs -lcuda`), loads it, and records which
    libcuda the module's driver call reached, or the linker's error."""
    return write_stand_in_vllm(folder, (
        "work = tempfile.mkdtemp()\n"
        "open(os.path.join(work, 'module.c'), 'w').write("
        "'const char *prebake_libcuda(void); const char *module_driver(void) { return prebake_libcuda(); }')\n"
        "built = subprocess.run(['gcc', '-shared', '-fPIC', os.path.join(work, 'module.c'), '-o',"
        " os.path.join(work, 'module.so'), '-L/usr/local/cuda/lib64/stubs', '-lcuda'], capture_output=True, text=True)\n"
        "if built.returncode:\n"
        "    seen['link_error'] = built.stderr.strip()\n"
        "else:\n"
        "    driver = ctypes.CDLL(os.path.join(work, 'module.so')).module_driver\n"
        "    driver.restype = ctypes.c_char_p\n"
        "    seen['module_reached'] = driver().decode()\n"), record)


@needs_root
@pytest.mark.parametrize("host_version, runtime, expected", [
    ("580.159.04", "disabled", "host-580.159.04:libcuda.so"),  # the host driver, as the runtime set it up
    ("580.159.04", "hook", "host-580.159.04:libcuda.so"),  # the host driver, over the runtime's newer compat
    ("570.195.03", "disabled", f"compat-{COMPAT_1300}:libcuda.so"),  # compat on an old driver
])
def test_a_module_compiled_on_the_pod_links_against_the_libcuda_vllm_loads(launcher, tmp_path, host_version,
                                                                           runtime, expected):
    compat = COMPAT_NEWER if runtime == "hook" else COMPAT_1300
    root = fx.make_root(tmp_path / "root", runtime, host_version, compat, compat_dir=launcher.compat_dir)
    record = tmp_path / "compiled.json"
    bin_dir = stand_in_vllm_compiling_a_module(tmp_path / "bin", record)
    env = launcher.base_env("h200_580" if host_version.startswith("580") else "a40x2_570")
    env.update({"PATH": f"{bin_dir}:{os.environ['PATH']}", "TMPDIR": str(tmp_path / "tmp"), **exec_ports()})
    control = in_container_namespace(root, [str(bin_dir / "vllm")], env)  # what the runtime alone gives
    assert control.returncode == 0, control.stderr
    assert "cannot find -lcuda" in json.loads(record.read_text())["link_error"]  # only libcuda.so.1 is there
    ran = in_container_namespace(root, [sys.executable, str(LAUNCH)], env)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(record.read_text()) == {"module_reached": expected}
    assert "linker: -lcuda links against" in ran.stderr


def test_no_driver_no_link(launcher, tmp_path):
    (tmp_path / "ld.so.conf").write_text("")  # a container with no driver mounted: no libcuda.so.1 anywhere
    subprocess.run([fx.LDCONFIG, "-X", "-f", str(tmp_path / "ld.so.conf"), "-C", str(tmp_path / "ld.so.cache")],
                   check=True, capture_output=True)
    env = {"VL_LD_CACHE": str(tmp_path / "ld.so.cache"), "VL_LD_SO_CONF": str(tmp_path / "ld.so.conf")}
    result = launcher.plan("h200_580", env=env)
    assert result.decision("linker")[0]["decision"] == "unchanged"
    assert "LIBRARY_PATH" not in result.env and "links" not in result.plan


def test_vllm_own_compat_switch_is_turned_off_where_the_host_driver_was_chosen(launcher):
    result = launcher.plan("h200_580", env={"VLLM_ENABLE_CUDA_COMPATIBILITY": "1"})
    assert result.env["VLLM_ENABLE_CUDA_COMPATIBILITY"] == "0"
    assert decision(result, "VLLM_ENABLE_CUDA_COMPATIBILITY=0")["why"].startswith("vLLM would put")
    kept = launcher.plan("a40x2_570", env={"VLLM_ENABLE_CUDA_COMPATIBILITY": "1"})  # compat chosen: harmless
    assert "VLLM_ENABLE_CUDA_COMPATIBILITY" not in kept.env
    assert "VLLM_ENABLE_CUDA_COMPATIBILITY" not in launcher.plan("h200_580", env={"VLLM_ENABLE_CUDA_COMPATIBILITY": "0"}).env
