"""The launcher's errors are typed (issue 58): what failed, the value given, what is wrong, what to do and the
exit code, rendered into the one line users read by report.render."""

from __future__ import annotations

import pytest

from entrypoint.launcher.cmdline import ContainerArgs
from entrypoint.launcher.knobs import resolve
from entrypoint.launcher.report import EXIT_CONFIG, EXIT_HOST, LaunchError, render


def test_a_fix_follows_a_colon_or_a_full_stop_as_written() -> None:
    assert render("VL_X='a' is not valid", "accepted values are on|off.") == \
        "VL_X='a' is not valid: accepted values are on|off."
    assert render("driver 470 is too old", "Pick a host with driver >= 550.") == \
        "driver 470 is too old. Pick a host with driver >= 550."
    assert render("container argument --x=1 is not accepted", "--x takes a plain value.") == \
        "container argument --x=1 is not accepted: --x takes a plain value."
    assert render("no fix known", "") == "no fix known"


def test_a_message_alone_still_makes_an_error() -> None:
    err = LaunchError("something broke.", EXIT_HOST)
    assert str(err) == "something broke." and err.problem == "something broke." and err.exit_code == EXIT_HOST
    assert err.as_json() == {"subject": "", "value": None, "problem": "something broke.", "fix": "",
                             "exit_code": EXIT_HOST, "message": "something broke."}


def test_a_container_argument_error_carries_the_option_and_its_value() -> None:
    with pytest.raises(LaunchError) as caught:
        ContainerArgs.of(["--port", "http"]).port
    err = caught.value
    assert (err.subject, err.value, err.exit_code) == ("--port", "http", EXIT_CONFIG)
    assert err.fix == "give 1-65535."
    assert str(err) == "container argument --port 'http' is not a port number: give 1-65535."


def test_a_knob_error_carries_the_variable_its_raw_value_and_the_accepted_values() -> None:
    with pytest.raises(LaunchError) as caught:
        resolve({"VL_BRIDGE": "sometimes"}, {})
    err = caught.value
    assert (err.subject, err.value) == ("VL_BRIDGE", "sometimes")
    assert err.problem == "VL_BRIDGE='sometimes' is not valid" and err.fix.startswith("accepted values are ")
    assert str(err) == f"{err.problem}: {err.fix}"


def test_every_host_probe_error_says_what_to_do() -> None:
    from entrypoint.launcher.probe import parse_query

    two_drivers = "0, NVIDIA A40, 46068, 580.65.06, 8.6\n1, NVIDIA A40, 46068, 570.1.2, 8.6\n"
    unreadable_memory = "0, NVIDIA A40, [N/A], 580.65.06, 8.6\n"
    for output, fix in [(two_drivers, "use another host."), (unreadable_memory, "VL_NVIDIA_SMI")]:
        with pytest.raises(LaunchError) as caught:
            parse_query(output, "/usr/bin/nvidia-smi")
        err = caught.value
        assert (err.subject, err.exit_code) == ("/usr/bin/nvidia-smi", EXIT_HOST) and fix in err.fix
        assert str(err).startswith("host probe: /usr/bin/nvidia-smi ") and str(err).endswith(err.fix)


def test_every_launcher_error_names_what_failed() -> None:
    """Each LaunchError raised in entrypoint/launcher gives its subject (the variable, option, file or program)."""
    import ast
    from pathlib import Path

    launcher = Path(__file__).resolve().parents[2] / "entrypoint" / "launcher"
    unnamed = []
    for path in sorted(launcher.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "LaunchError" \
                    and "subject" not in {keyword.arg for keyword in node.keywords}:
                unnamed.append(f"{path.relative_to(launcher)}:{node.lineno}")
    assert unnamed == []
