"""What a newcomer reads before the first pod: the quickstart's cost of the path to a public image says what the
workflow itself does (its jobs and their time limits, the variants and kernel sets `./build.py matrix` lists), the
figures it quotes are docs/measurements.md's, and one RunPod secret name holds the pod's key in every doc and
example."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import yaml

from prebake_testing.hosts import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def cost_paragraph() -> str:
    text = (ROOT / "docs" / "quickstart.md").read_text()
    return text.split("**What that path costs**", 1)[1].split("\n\n", 1)[0]


def test_the_cost_of_a_public_image_is_the_workflows_own():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "images.yml").read_text())
    jobs = {name: job for name, job in workflow["jobs"].items() if "push" in job.get("if", "")}
    assert set(jobs) == {"stack", "kernels", "publish"}, set(jobs)
    text = " ".join(cost_paragraph().split())
    assert "caps each `stack` and `kernels` job at 180 minutes and each `publish` job at 120" in text
    assert (jobs["stack"]["timeout-minutes"], jobs["kernels"]["timeout-minutes"], jobs["publish"]["timeout-minutes"]) \
        == (180, 180, 120)
    assert jobs["publish"]["needs"] == ["matrix", "stack", "kernels"]  # "once every `kernels` job is done"

    def matrix(*args: str) -> list[str]:
        done = subprocess.run([sys.executable, str(ROOT / "build.py"), "matrix", *args], capture_output=True,
                              text=True, timeout=60, check=True)
        return [entry["variant"] for entry in json.loads(done.stdout)["include"]]

    assert f"({', '.join(matrix())})" in text
    assert f"({', '.join(matrix('--kernels')[:-1])} and {matrix('--kernels')[-1]};" in text


def test_the_figures_quoted_are_the_measured_ones():
    measured = " ".join((ROOT / "docs" / "measurements.md").read_text().split())
    text = " ".join(cost_paragraph().split())
    for figure in ("264 s", "about 63 min", "126-158 s"):
        assert figure in text and figure in measured, figure
    assert "74.5 s" in measured and "112.8 s" in measured and "75-113 s" in text


def test_one_secret_name_for_the_pods_key_everywhere():
    """README once said `pod_key` and the quickstart `prebake_api_key`: a newcomer made two secrets."""
    names = set()
    examples = DOCS + sorted((ROOT / "tests").rglob("*.py"))  # the code's messages say NAME (and English)
    for path in examples + sorted((ROOT / "prebake").rglob("*.py")) + sorted((ROOT / "entrypoint").rglob("*.py")):
        text = path.read_text()
        if path in examples:
            names |= {(m, path.name) for m in re.findall(r"--api-key-secret[ =]([A-Za-z0-9_-]+)", text)}
        names |= {(m, path.name) for m in re.findall(r"RUNPOD_SECRET_([A-Za-z0-9_-]+)", text)}
    # NAME, name: placeholders (the code's f-strings); router_key: the router's own key (docs/router.md), not a pod's; k, bad, x: tests' refusals
    others = {(name, where) for name, where in names if name not in {"prebake_api_key", "NAME", "name", "router_key", "hf_token"}
              and not where.startswith("test_") or name in {"pod_key", "pods_key"}}
    assert not others, sorted(others)


def step_one() -> str:
    text = (ROOT / "docs" / "quickstart.md").read_text()
    return " ".join(text.split("## 1. Get an image", 1)[1].split("## 2.", 1)[0].split())


def test_the_quickstart_leads_with_the_path_that_fits_the_first_hour_and_cites_its_times():
    """Round 4 of a newcomer's first hour: "pull what CI pushed" came first, and CI's path takes one to one and a
    half hours; building one variant and pushing it fits the hour. It comes first, with the measured times."""
    text = step_one()
    paths = re.findall(r"\*\*(The fastest path today|Later: let CI build every variant|See it work before renting "
                       r"a GPU)", text)
    assert paths == ["The fastest path today", "See it work before renting a GPU", "Later: let CI build every variant"]
    fastest = text.split("**See it work", 1)[0]
    assert "./build.py --variant a40 --registry ghcr.io/your-github-user --push" in fastest
    measured = " ".join((ROOT / "docs" / "measurements.md").read_text().split())
    for figure in ("264 s", "153-157 s"):
        assert figure in fastest and f"{figure}" in measured, figure
    assert "./build.py try --image" in text


def test_readmes_first_screen_is_for_a_runpod_user():
    """The README's first screen was the builder's view; now it says what prebake does for a RunPod user and where
    to start, and the builder's details come below it."""
    first = (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    for needed in ("RunPod", "Claude Code", "docs/quickstart.md", "docs/troubleshooting.md", "./build.py try"):
        assert needed in first, needed
    for builder_detail in ("Docker Hub", "debootstrap", "FlashInfer", "NCCL", "root", "Jinja", "Dockerfile"):
        assert builder_detail not in first, builder_detail
    assert len(first.splitlines()) <= 25
