"""A process finds the generated module of a kernel it launches again without generating its text
(``backends/cpu_index.py``), and generates anew whatever changed."""

import json
import os
import subprocess
import sys
import textwrap

import difftape as wp
from difftape._src.backends import cpu_index
from difftape._src.frontend import ir

_SCRIPT = """
    import json
    import sys

    import numpy as np
    import difftape as wp
    from difftape._src.backends import cpu

    generated = []
    _generate = cpu._generate

    def counting(kernel, *args):
        generated.append(kernel.name)
        return _generate(kernel, *args)

    cpu._generate = counting

    from difftape._src import access

    analyzed = []
    _analyze = access.analyze_access

    def analyzing(kernel):
        analyzed.append(kernel.name)
        return _analyze(kernel)

    access.analyze_access = analyzing

    from difftape._src import cache_files

    compiled = []

    def compiling(source, filename, *args, **kwargs):  # shadows the builtin there
        compiled.append("module" if "difftape_gen_" in filename else "launcher")
        return compile(source, filename, *args, **kwargs)

    cache_files.compile = compiling

    SCALE = wp.constant(float(sys.argv[1]))

    @wp.kernel
    def scaled(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = SCALE * x[i] * x[i]

    @wp.kernel
    def partial_sum(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        s = float(0.0)
        for k in range(4):
            if k == 2:
                break
            s += x[i] * float(k + 1)
        y[i] = s

    out = {}
    for kernel in (scaled, partial_sum):
        x = wp.array(np.arange(4, dtype=np.float32), dtype=float, requires_grad=True)
        y = wp.zeros(4, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, 4, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones(4, dtype=float)})
        out[kernel.key] = [y.numpy().tolist(), x.grad.numpy().tolist()]
        for program in kernel._built.values():
            with open(program.path) as f:
                assert f.read() == program.source
    out["generated"] = sorted(generated)
    out["analyzed"] = sorted(analyzed)
    out["compiled"] = sorted(compiled)
    print(json.dumps(out))
"""


def _runs(tmp_path, argv_seeds) -> list[dict]:
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(_SCRIPT))
    runs = []
    for arg, seed in argv_seeds:
        env = dict(os.environ, DIFFTAPE_CACHE_DIR=str(tmp_path / "cache"),
                   NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONHASHSEED=str(seed),
                   DIFFTAPE_COMPILE_AHEAD="0", PYTHONDONTWRITEBYTECODE="1")
        runs.append(json.loads(subprocess.run([sys.executable, str(path), arg], env=env,
                                              capture_output=True, text=True,
                                              check=True).stdout))
    return runs


def test_a_later_process_imports_known_modules_and_generates_changed_ones(tmp_path):
    """Forward and adjoint of both kernels are generated once, and their access facts analysed
    once; a process with other string hash seeds finds them all; a changed constant generates
    and analyses the kernel that reads it, only."""
    first, again, changed = _runs(tmp_path, [("2.0", 1), ("2.0", 2), ("3.0", 3)])
    assert first["generated"] == ["partial_sum", "partial_sum", "scaled", "scaled"]
    assert first["analyzed"] == ["partial_sum", "scaled"]
    assert again["generated"] == again["analyzed"] == []
    # Python keeps no bytecode here (PYTHONDONTWRITEBYTECODE): difftape keeps the code objects
    assert first["compiled"] == ["launcher"] * 2 + ["module"] * 4 and again["compiled"] == []
    assert changed["generated"] == ["scaled", "scaled"] and changed["analyzed"] == ["scaled"]
    assert first["scaled"] == again["scaled"] == [[0.0, 2.0, 8.0, 18.0], [0.0, 4.0, 8.0, 12.0]]
    assert changed["scaled"] == [[0.0, 3.0, 12.0, 27.0], [0.0, 6.0, 12.0, 18.0]]
    assert first["partial_sum"] == again["partial_sum"] == changed["partial_sum"] == [
        [0.0, 3.0, 6.0, 9.0], [3.0, 3.0, 3.0, 3.0]]


def test_an_entry_whose_module_is_gone_is_generated_again(tmp_path):
    (first,) = _runs(tmp_path, [("2.0", 0)])
    for name in os.listdir(tmp_path / "cache"):
        if name.startswith("difftape_gen_scaled_"):
            os.unlink(tmp_path / "cache" / name)
    (second,) = _runs(tmp_path, [("2.0", 0)])
    assert second["generated"] == ["scaled", "scaled"]
    assert second["scaled"] == first["scaled"]


@wp.kernel
def _square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_keys_tell_variants_and_directions_apart():
    kernel = _square.ir
    forward = _square.variant(1)
    keys = {cpu_index.key(kernel, forward, "f.py:1", (False,)),
            cpu_index.key(kernel, _square.variant(1, atomic=True), "f.py:1", (False,)),
            cpu_index.key(kernel, forward, "f.py:1", (False, True)),
            cpu_index.key(kernel, forward, "g.py:1", (False,))}
    assert len(keys) == 4 and None not in keys
    assert cpu_index.key(kernel, forward, "f.py:1", (False,)) in keys


def test_an_ir_that_does_not_pickle_has_no_key():
    """Such a kernel is generated every time, as before the index."""
    kernel = ir.KernelIR(name="odd", params=[], locals={}, tid_vars=(),
                         body=[ir.Assign(target="a", value=ir.Const(float, lambda: 0.0))])
    assert cpu_index.key(kernel, _square.variant(1), "f.py:1", (False,)) is None


def test_an_ir_nested_past_pickles_depth_has_no_key():
    value = ir.Const(float, 1.0)
    for _ in range(100_000):
        value = ir.Cast(float, value)
    kernel = ir.KernelIR(name="deep", params=[], locals={}, tid_vars=(),
                         body=[ir.Assign(target="a", value=value)])
    assert cpu_index.key(kernel, _square.variant(1), "f.py:1", (False,)) is None


def test_the_code_stamp_is_kept_under_the_source_listing(tmp_path, monkeypatch):
    monkeypatch.setattr(wp.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(cpu_index, "_CODE_STAMP", None)
    stamp = cpu_index._code_stamp()
    kept = list(tmp_path.glob("code_stamp_*.txt"))
    assert len(kept) == 1 and kept[0].read_text() == stamp and len(stamp) == 64

    def no_hashing(*args):
        raise AssertionError("the kept stamp should have been read")

    monkeypatch.setattr(cpu_index, "_CODE_STAMP", None)
    monkeypatch.setattr(cpu_index, "_hash_sources", no_hashing)
    assert cpu_index._code_stamp() == stamp
    monkeypatch.undo()

    monkeypatch.setattr(wp.config, "cache_dir", str(tmp_path))
    monkeypatch.setattr(cpu_index, "_CODE_STAMP", None)
    kept[0].write_text(stamp[:10])  # cut short: hashed again, and kept whole
    assert cpu_index._code_stamp() == stamp and kept[0].read_text() == stamp
