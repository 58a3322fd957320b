"""`docker run --init` puts Docker's own init at PID 1: the image's tini then runs as a child and,
unless it registers as a subreaper (`tini -s`), warned at every start (issue 10)."""

import pytest

from prebake_testing.hosts import fake_nvidia_smi_for_image

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("init", [False, True], ids=["tini-pid-1", "docker-run-init"])
def test_tini_starts_the_launcher_without_a_warning(client, tiny, tmp_path, init):
    fake = fake_nvidia_smi_for_image(tmp_path / "fake", "a40x1_580")
    container = client.containers.run(tiny["image"], command=["--dry-run"], detach=True, init=init,
                                      network_disabled=True, environment={"VL_NVIDIA_SMI": "/opt/fake/nvidia-smi"},
                                      volumes={str(fake): {"bind": "/opt/fake", "mode": "ro"}})
    try:
        assert container.wait(timeout=120)["StatusCode"] == 0
        stderr = container.logs(stdout=False, stderr=True).decode()
        stdout = container.logs(stdout=True, stderr=False).decode()
    finally:
        container.remove(force=True)
    assert "tini" not in stderr.lower(), stderr  # "[WARN  tini (7)] Tini is not running as PID 1 ..."
    assert '"argv"' in stdout
