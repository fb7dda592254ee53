"""Every ```python block in ``docs/*.md`` and ``README.md`` runs, so the documentation cannot rot.

The blocks of one page run in order in one shared namespace (a page is one script; later blocks
use what earlier ones defined), each page in a fresh namespace. Blocks fenced as
```python notest are not run. Each block is written to its own file first, because kernels are
parsed from their source file. Pages that need PyTorch are skipped without it.
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
BLOCK = re.compile(r"^```python[ \t]*(?P<flags>[^\n]*)\n(?P<code>.*?)^```[ \t]*$",
                   re.MULTILINE | re.DOTALL)


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each runnable ```python block."""
    blocks = []
    for match in BLOCK.finditer(text):
        if "notest" in match.group("flags").split():
            continue
        blocks.append((text.count("\n", 0, match.start()) + 2, match.group("code")))
    return blocks


def test_block_parser():
    text = "x\n```python\na = 1\n```\n```python notest\nboom\n```\n```text\nno\n```\n"
    assert python_blocks(text) == [(3, "a = 1\n")]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_page_runs(page, tmp_path, monkeypatch):
    text = page.read_text()
    if "import torch" in text and importlib.util.find_spec("torch") is None:
        pytest.skip("this page needs PyTorch")
    blocks = python_blocks(text)
    if not blocks:
        pytest.skip("no python blocks")
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    namespace = {"__name__": f"docs_{page.stem}"}
    for number, (line, code) in enumerate(blocks):
        path = tmp_path / f"{page.stem}_block{number}_line{line}.py"
        path.write_text(code)
        try:
            exec(compile(code, str(path), "exec"), namespace)
        except Exception as err:
            raise AssertionError(f"{page.name}, block at line {line} failed: {err!r}") from err
