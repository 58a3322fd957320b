"""`runpod template`: the pod stops itself after VL_IDLE_STOP minutes without a request, by default 60; the
person publishing changes it or turns it off, and the value is checked with the launcher's own parser."""

from __future__ import annotations

import json

import pytest

from prebake.cli import main
from prebake.runpod import DEFAULT_IDLE_STOP_MIN

IMAGE = "ghcr.io/owner/prebake:a40-vllm0.27.1-cu13.0-abc1234"


def template(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict | None, str]:
    """The JSON body, and stderr: the console's fields, then the readme (which v2's templates have no field for)."""
    status = main(["runpod", "template", "--variant", "a40", "--image", IMAGE, "--image-size-gb", "8", *args])
    out, err = capsys.readouterr()
    return status, json.loads(out) if status == 0 else None, err


def test_the_template_sets_an_idle_stop_and_its_readme_says_what_a_stop_does(capsys):
    status, payload, readme = template(capsys)
    assert status == 0 and DEFAULT_IDLE_STOP_MIN == "60" and payload["env"]["VL_IDLE_STOP"] == "60"
    assert "no request for 60 minutes (VL_IDLE_STOP; `off` turns it off)" in readme
    assert "volume at /workspace" in readme and "container disk is reset" in readme and "may have been rented" in readme


@pytest.mark.parametrize("args, value", [(["--idle-stop", "15"], "15"), (["--idle-stop", "0.5"], "0.5"),
                                         (["--idle-stop", "off"], "off"), (["--env", "VL_IDLE_STOP=off"], "off"),
                                         (["--env", "VL_IDLE_STOP=120"], "120")])
def test_the_person_publishing_changes_it_or_turns_it_off(capsys, args, value):
    status, payload, readme = template(capsys, *args)
    assert status == 0 and payload["env"]["VL_IDLE_STOP"] == value
    assert ("Idle stop is off" in readme) == (value == "off")


@pytest.mark.parametrize("args, code, needle", [
    (["--idle-stop", "soon"], 2, "Invalid value for '--idle-stop': 'soon': accepted values are minutes > 0"),
    (["--idle-stop", "-5"], 2, "'-5': accepted values"),
    (["--idle-stop", "99999"], 2, "at most 10080"),
    (["--env", "VL_IDLE_STOP=1e3"], 1, "VL_IDLE_STOP='1e3' is not valid"),
    (["--idle-stop", "30", "--env", "VL_IDLE_STOP=5"], 1, "give one"),
])
def test_a_bad_idle_stop_is_refused_before_anything_is_printed(capsys, args, code, needle):
    status, payload, err = template(capsys, *args)
    assert status == code and payload is None and needle in err and "Traceback" not in err, err
