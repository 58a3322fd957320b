"""The commands README.md and docs/ show work as shown, and the pages name only what the repository holds.

A fenced `sh` block preceded by `<!-- runs-offline -->` is run here, as written, from the repository root with
this Python's venv first on PATH and no Docker Engine, RunPod or registry within reach: it must exit 0. On the
pages listed in CLASSIFIED, every other `sh` block must say what it needs (`<!-- needs: ... -->`, and the text
around it says so to the reader) or be README's test command (`<!-- test-command -->`, which .ci/run runs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNS_OFFLINE = "<!-- runs-offline -->"
NEEDS = re.compile(r"<!-- needs: \S.* -->")
TEST_COMMAND = "<!-- test-command -->"
# Pages whose every shell block is classified; a page joins the list once its blocks are marked.
CLASSIFIED = ("README.md", "docs/quickstart.md", "docs/troubleshooting.md", "docs/publishing.md",
              "docs/measurements.md", "docs/selftest.md")


@dataclass(frozen=True)
class Block:
    page: str
    line: int  # of the opening fence, 1-based
    marker: str  # the last non-blank line before the fence
    text: str

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def shell_blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found, position = [], 0
    while position < len(lines):
        if re.fullmatch(r"```(sh|bash|shell)\s*", lines[position]):
            end = next(i for i in range(position + 1, len(lines)) if lines[i].startswith("```"))
            before = next((lines[i].strip() for i in range(position - 1, -1, -1) if lines[i].strip()), "")
            found.append(Block(str(path.relative_to(ROOT)), position + 1, before,
                               "\n".join(lines[position + 1:end]) + "\n"))
            position = end
        position += 1
    return found


ALL_BLOCKS = [block for page in PAGES for block in shell_blocks(page)]
OFFLINE = [block for block in ALL_BLOCKS if block.marker == RUNS_OFFLINE]


def test_there_are_offline_blocks_to_run() -> None:
    pages = {block.page for block in OFFLINE}
    assert {"docs/quickstart.md", "docs/troubleshooting.md", "README.md"} <= pages, pages


def test_every_shell_block_says_whether_it_runs_offline_or_what_it_needs() -> None:
    unmarked = [str(block) for block in ALL_BLOCKS if block.page in CLASSIFIED
                and not (block.marker in (RUNS_OFFLINE, TEST_COMMAND) or NEEDS.fullmatch(block.marker))]
    assert not unmarked, f"mark each with {RUNS_OFFLINE} or <!-- needs: what it needs -->: {unmarked}"


@pytest.mark.parametrize("block", OFFLINE, ids=str)
def test_an_offline_block_runs_as_shown(block: Block, tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("VL_", "PREBAKE_", "RUNPOD_", "DOCKER_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', os.defpath)}", HOME=str(tmp_path),
               DOCKER_HOST=f"unix://{tmp_path}/no-docker.sock",  # offline means no Docker Engine either
               RUNPOD_REST_URL="http://127.0.0.1:9/v2")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block.text], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{block} exited {result.returncode}:\n{block.text}\n{result.stderr[-3000:]}"
    assert result.stdout.strip(), f"{block} printed nothing"


DANGLING = [
    (re.compile(r"reference/|vllm_bootstrap"), "the bootstrap script is not in the repository: describe it in words"),
    (re.compile(r"DESIGN\.md|docs/design\.md"), "there is no design document in the repository"),
    (re.compile(r"\b[Ii]ssues? \d+|\(issue\b|\bthe issue's\b"), "issue numbers mean nothing to a reader"),
    (re.compile(r"\blines? \d+(-\d+)?(, \d+(-\d+)?)*\b.*script|script.*\blines? \d+"), "line numbers of the script"),
]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_name_only_what_the_repository_holds(page: Path) -> None:
    problems = [f"{page.name}:{number}: {why}: {line.strip()[:120]}"
                for number, line in enumerate(page.read_text().splitlines(), 1)
                for pattern, why in DANGLING if pattern.search(line)]
    assert not problems, "\n".join(problems)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_their_anchors_exist(page: Path) -> None:
    broken = []
    for target, anchor in re.findall(r"\]\((?!https?://|mailto:)([^)#\s]*)(?:#([^)\s]+))?\)", page.read_text()):
        path = (page.parent / target).resolve() if target else page
        if not path.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and path.suffix == ".md":
            anchors = {_slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)}
            if anchor not in anchors:
                broken.append(f"{target}#{anchor} (no such heading)")
    assert not broken, f"{page.name}: {broken}"
