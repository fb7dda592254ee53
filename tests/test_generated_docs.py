"""The committed ``docs/builtins.md`` and ``difftape/__init__.pyi`` match the registry and API."""

import ast
import importlib.util
import inspect
from pathlib import Path

import difftape
from difftape._src.ops import public

ROOT = Path(__file__).resolve().parent.parent


def load_generator():
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bound_names(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            # Stub convention: only `import X as Y` re-exports (`from typing import Any` does not).
            names |= {a.asname for a in node.names if a.asname}
        elif isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.asname}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def init_public_names() -> set[str]:
    tree = ast.parse((ROOT / "difftape" / "__init__.py").read_text())
    return {n for n in bound_names(tree) if not n.startswith("_")} | set(public.__all__)


def test_generated_files_are_up_to_date():
    gen = load_generator()
    for path, text in gen.outputs().items():
        assert path.read_text() == text, (
            f"{path.relative_to(ROOT)} is stale: run `python tools/gen_docs.py`")


def test_stub_lists_every_public_name():
    stub = ast.parse((ROOT / "difftape" / "__init__.pyi").read_text())
    stub_public = {n for n in bound_names(stub) if not n.startswith("_")} - {"__version__"}
    expected = init_public_names()
    assert stub_public == expected
    runtime = {n for n, v in vars(difftape).items()
               if not n.startswith("_") and not inspect.ismodule(v)}
    assert runtime <= stub_public


def test_stub_has_builtin_signatures_and_typed_marker():
    text = (ROOT / "difftape" / "__init__.pyi").read_text()
    assert "def sin(x: _Float) -> _Float:" in text
    assert "from difftape._src.composite import vec3 as vec3" in text
    assert (ROOT / "difftape" / "py.typed").exists()
    compile(text, "__init__.pyi", "exec")


def test_builtins_reference_covers_every_key():
    text = (ROOT / "docs" / "builtins.md").read_text()
    for key in public.__all__:
        assert f"\n### {key}\n" in text
