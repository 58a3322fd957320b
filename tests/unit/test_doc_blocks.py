"""Every Claude Code block the docs print is the generator's (entrypoint/claudecode.py, `./build.py claude-code`):
a fenced block that sets ANTHROPIC_BASE_URL follows a `<!-- claude-code: ARGS -->` line, and holds exactly what
`./build.py claude-code ARGS` prints (indented as the block's sample indents it). A hand-written block once lacked
the model pins and the context (docs/router.md), and Claude Code then sized its context wrongly."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!-- claude-code: (.+?) -->")


def fenced(lines: list[str], start: int) -> tuple[int, str]:
    """The first fenced block at or after `start`: (the line after it, its text without the fence's indentation)."""
    opening = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("```"))
    indent = len(lines[opening]) - len(lines[opening].lstrip())
    closing = next(i for i in range(opening + 1, len(lines)) if lines[i].lstrip().startswith("```"))
    return closing + 1, "".join(line[indent:] + "\n" for line in lines[opening + 1:closing])


def marked_blocks() -> list[tuple[str, str, str]]:
    found = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            marker = MARKER.search(line)
            if marker:
                found.append((f"{page.relative_to(ROOT)}:{number + 1}", marker.group(1), fenced(lines, number + 1)[1]))
    return found


def test_there_are_marked_blocks_on_each_page_that_prints_one():
    pages = {where.split(":")[0] for where, _, _ in marked_blocks()}
    assert {"docs/quickstart.md", "docs/status.md", "docs/swap.md", "docs/router.md"} <= pages, pages


@pytest.mark.parametrize("where, args, text", marked_blocks(), ids=lambda value: value if ".md:" in str(value) else "")
def test_a_marked_block_is_what_the_generator_prints(where, args, text):
    printed = subprocess.run([sys.executable, str(ROOT / "build.py"), "claude-code", *shlex.split(args)],
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, printed.stderr
    indents = {len(line) - len(line.lstrip()) for line in text.splitlines() if line.lstrip().startswith("if [ -z")}
    assert len(indents) == 1, (where, text)
    indent = " " * indents.pop()
    block = "".join(indent + line + "\n" for line in printed.stdout.splitlines())
    assert block in text, (where, printed.stdout)


def test_every_block_that_points_claude_code_at_a_pod_is_marked():
    for page in PAGES:
        lines, position = page.read_text().splitlines(), 0
        while True:
            try:
                after, text = fenced(lines, position)
            except StopIteration:
                break
            opening = next(i for i in range(position, len(lines)) if lines[i].lstrip().startswith("```"))
            if "export ANTHROPIC_BASE_URL" in text or re.search(r"ANTHROPIC_BASE_URL=\S+.* claude$", text, re.M):
                before = next(lines[i] for i in range(opening - 1, -1, -1)
                              if lines[i].strip() and not lines[i].strip().startswith("<!-- needs:"))
                assert MARKER.search(before), f"{page.relative_to(ROOT)}:{opening + 1} is not the generator's"
            position = after
