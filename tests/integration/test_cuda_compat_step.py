"""The stack's cuda-compat step installs the package only when the base lacks it, and says which.

The step's RUN command is taken from a committed Dockerfile and run in the Debian test base,
offline, with a cuda-compat-13-0 package built here (the real one lives in NVIDIA's apt
repository, which these machines cannot reach) and an apt-get stand-in that records its calls.
"""

import subprocess

import pytest

from prebake_testing import REPO

pytestmark = pytest.mark.docker
STACK = REPO / "dockerfiles" / "a40" / "stack.Dockerfile"

# A cuda-compat-13-0 like NVIDIA's: /usr/local/cuda-13.0/compat/libcuda.so.1 -> libcuda.so.<driver>.
MAKE_PACKAGE = r"""
mkdir -p /tmp/pkg/DEBIAN /tmp/pkg/usr/local/cuda-13.0/compat
printf 'Package: cuda-compat-13-0\nVersion: 580.95.05-0ubuntu1\nArchitecture: all\nMaintainer: test\nDescription: stand-in\n' > /tmp/pkg/DEBIAN/control
: > /tmp/pkg/usr/local/cuda-13.0/compat/libcuda.so.580.95.05
ln -s libcuda.so.580.95.05 /tmp/pkg/usr/local/cuda-13.0/compat/libcuda.so.1
dpkg-deb --build /tmp/pkg /tmp/cuda-compat-13-0.deb >/dev/null
mkdir -p /tmp/fakebin
"""
APT_INSTALLS = r"""
cat > /tmp/fakebin/apt-get <<'EOF'
#!/bin/sh
echo "apt-get $*" >> /tmp/apt-calls
case "$1" in install) dpkg -i /tmp/cuda-compat-13-0.deb >/dev/null ;; esac
EOF
chmod +x /tmp/fakebin/apt-get
"""
APT_FAILS = r"""
printf '#!/bin/sh\necho "apt-get $*" >> /tmp/apt-calls\necho "E: Unable to locate package cuda-compat-13-0" >&2\nexit 100\n' > /tmp/fakebin/apt-get
chmod +x /tmp/fakebin/apt-get
"""


def compat_step() -> str:
    lines = STACK.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("RUN if") and "cuda-compat-13-0" in line)
    end = next(i for i in range(start, len(lines)) if "test -e /usr/local/cuda-13.0/compat/libcuda.so.1" in lines[i])
    return "\n".join(lines[start:end + 1])[len("RUN "):]


def run_in_base(test_base: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "run", "--rm", "--network", "none", "-i", test_base, "sh", "-s"],
                          input=script, capture_output=True, text=True, timeout=120)


def report(script_tail: str) -> str:
    return (f"PATH=/tmp/fakebin:$PATH\nset +e\n( {script_tail} )\necho \"rc=$?\"\n"
            "echo \"calls=$(cat /tmp/apt-calls 2>/dev/null | tr '\\n' ';')\"\n"
            "echo \"source=$(cat /opt/.cuda_compat_source 2>/dev/null)\"\n")


def test_base_with_the_package_installs_nothing(test_base):
    script = MAKE_PACKAGE + APT_FAILS + "dpkg -i /tmp/cuda-compat-13-0.deb >/dev/null\n" + report(compat_step())
    done = run_in_base(test_base, script)
    assert "cuda-compat-13-0 580.95.05-0ubuntu1 comes with the base image: not installed again" in done.stdout
    assert "rc=0" in done.stdout and "calls=\n" in done.stdout + "\n"
    assert "source=base cuda-compat-13-0 580.95.05-0ubuntu1" in done.stdout


def test_base_without_it_installs_it_from_apt(test_base):
    done = run_in_base(test_base, MAKE_PACKAGE + APT_INSTALLS + report(compat_step()))
    assert "rc=0" in done.stdout, done.stdout + done.stderr
    assert "apt-get install -y --no-install-recommends cuda-compat-13-0" in done.stdout
    assert "source=stack cuda-compat-13-0 580.95.05-0ubuntu1" in done.stdout


def test_base_without_it_and_no_repository_fails_the_build(test_base):
    done = run_in_base(test_base, MAKE_PACKAGE + APT_FAILS + report(compat_step()))
    assert "rc=0" not in done.stdout and "Unable to locate package cuda-compat-13-0" in done.stderr
