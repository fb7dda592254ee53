"""``Tape.visualize`` (SPEC §1.11, §6 item 43), ``wp.ScopedTimer`` tape scopes, and repeat folding.

The dot text is parsed with pydot: tests check nodes, edges, clusters and attributes, not only
substrings.
"""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

import difftape as wp
from difftape._src.repeats import Item, Repeat, find_repeats

pydot = pytest.importorskip("pydot")
with warnings.catch_warnings():  # pydot's grammar uses pyparsing names deprecated in pyparsing 3
    warnings.simplefilter("ignore", DeprecationWarning)
    import pydot.dot_parser  # noqa: E402,F401


@wp.kernel
def dot_product(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(z, 0, x[tid] * y[tid])


@wp.kernel
def step(x: wp.array(dtype=float), v: wp.array(dtype=float), dt: float,
         x_next: wp.array(dtype=float)):
    tid = wp.tid()
    x_next[tid] = x[tid] + v[tid] * dt


@wp.kernel
def scale(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = x[tid] * 2.0


def parse(text: str):
    graphs = pydot.graph_from_dot_data(text)
    assert graphs, "visualize produced dot text pydot cannot parse"
    return graphs[0]


def all_nodes(graph) -> dict[str, object]:
    """Every node statement, in clusters too, by name (pydot's default-attribute nodes skipped)."""
    found = {n.get_name(): n for n in graph.get_nodes() if n.get_name() not in ("node", "graph",
                                                                                 "edge")}
    for sub in graph.get_subgraphs():
        found.update(all_nodes(sub))
    return found


def all_edges(graph) -> list[tuple[str, str, object]]:
    edges = [(e.get_source(), e.get_destination(), e) for e in graph.get_edges()]
    for sub in graph.get_subgraphs():
        edges += all_edges(sub)
    return edges


def clusters(graph) -> list:
    found = []
    for sub in graph.get_subgraphs():
        found.append(sub)
        found += clusters(sub)
    return found


def unquote(value) -> str:
    return str(value).strip('"')


def label_of(node) -> str:
    return unquote(node.get("label"))


def kernel_names(graph) -> list[str]:
    return [n for n in all_nodes(graph) if n.startswith("kernel")]


def arrays_by_label(graph) -> dict[str, str]:
    return {label_of(n): name for name, n in all_nodes(graph).items() if name.startswith("arr")}


def f32(n: int, value: float = 1.0, grad: bool = True) -> wp.array:
    return wp.array(np.full(n, value, np.float32), dtype=float, requires_grad=grad)


def record_scoped_loop():
    x, y = f32(8, 16.0), f32(8, 32.0)
    z = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        tape.record_scope_begin("my loop")
        for _ in range(16):
            wp.launch(dot_product, dim=8, inputs=[x, y], outputs=[z])
        tape.record_scope_end()
    return tape, x, y, z


# --------------------------------------------------------------------------- Warp's tests


def test_sixteen_repeats_in_a_scope_fold_into_one_kernel():
    tape, x, y, z = record_scoped_loop()
    text = tape.visualize(simplify_graph=True)
    assert "repeated 16x" in text and "my loop" in text and text.count("dot_product") == 1
    graph = parse(text)
    (cluster,) = clusters(graph)
    assert cluster.get_name() == "cluster0"
    assert unquote(cluster.get("label")) == "<<b>my loop (repeated 16x)</b>>"
    assert unquote(cluster.get("fillcolor")) == "#0072B922"
    assert kernel_names(graph) == ["kernel0"]
    arrays = arrays_by_label(graph)
    assert set(arrays) == {"x", "y", "z"}
    edges = {(s, d) for s, d, _ in all_edges(graph)}
    assert edges == {(arrays["x"], "kernel0:in_0"), (arrays["y"], "kernel0:in_1"),
                     ("kernel0:out_0", arrays["z"])}


def test_without_simplification_every_launch_is_a_node():
    tape, *_ = record_scoped_loop()
    graph = parse(tape.visualize(simplify_graph=False))
    assert len(kernel_names(graph)) == 16
    (cluster,) = clusters(graph)
    assert unquote(cluster.get("label")) == "<<b>my loop</b>>"
    assert unquote(cluster.get("fillcolor")) == "#76B90022"


def test_header_ports_tooltips_and_direction():
    tape, *_ = record_scoped_loop()
    text = tape.visualize(graph_direction="TB")
    assert text.startswith('digraph " " {\n    graph [fontname="Helvetica,Arial,sans-serif"')
    assert "    rankdir=TB;\n" in text
    graph = parse(text)
    kernel = all_nodes(graph)["kernel0"]
    label = kernel.get("label")
    assert '<TD PORT="in_0" BGCOLOR="#BBBBBB" align="left" title="array: dtype=float32">' \
           '<font color="black">x</font></TD>' in label
    assert '<TD PORT="out_0" BGCOLOR="#BBBBBB" align="right"><font color="black">z</font>' \
        in label
    caller = tape.launches[0][7]["caller"]
    expected = (__file__.replace("/", "&#47;") + f":{caller['lineno']} (record_scoped_loop)")
    assert unquote(kernel.get("tooltip")) == expected


def test_scalar_parameters_get_a_dtype_title_and_arrays_are_coloured():
    x, v = f32(4), f32(4, grad=False)
    x1 = wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(step, 4, inputs=[x, v, 0.1], outputs=[x1])
    graph = parse(tape.visualize())
    assert 'title="dtype=float32"><font color="black">dt</font>' in \
        all_nodes(graph)["kernel0"].get("label")
    nodes = all_nodes(graph)
    arrays = arrays_by_label(graph)
    assert unquote(nodes[arrays["x"]].get("fillcolor")) == "#76B900"
    assert unquote(nodes[arrays["v"]].get("fillcolor")) == "lightgray"
    assert unquote(nodes[arrays["x1"]].get("tooltip")) == (
        f"Array x1 / ptr={x1.ptr}, shape=(4,), dtype=float32, requires_grad=True")


def test_writes_the_dot_file(tmp_path):
    tape, *_ = record_scoped_loop()
    path = tmp_path / "tape.dot"
    text = tape.visualize(str(path))
    assert path.read_text() == text


# --------------------------------------------------------------------------- names


def test_arrays_are_named_after_caller_variables_and_lists():
    states = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(3)]
    velocity = f32(4)
    tape = wp.Tape()
    with tape:
        wp.launch(step, 4, inputs=[states[0], velocity, 0.1], outputs=[states[1]])
        wp.launch(scale, 4, inputs=[states[1]], outputs=[states[2]])
    arrays = arrays_by_label(parse(tape.visualize(simplify_graph=False)))
    assert set(arrays) == {"states[0]", "velocity", "states[1]", "states[2]"}


def test_array_labels_and_tracked_names_win():
    x, y = f32(4), wp.zeros(4, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 4, inputs=[x], outputs=[y])
    text = tape.visualize(array_labels={x: "positions"}, track_outputs=[y],
                          track_output_names=["doubled"])
    assert set(arrays_by_label(parse(text))) == {"positions", "doubled"}
    text = tape.visualize(track_inputs=[x])
    assert "input_0" in arrays_by_label(parse(text))


def test_parameter_labels_choose_longest_or_last():
    def record():
        a = wp.zeros(4, dtype=float, requires_grad=True)
        b = wp.zeros(4, dtype=float, requires_grad=True)
        c = wp.zeros(4, dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(step, 4, inputs=[a, a, 0.1], outputs=[b])  # a is "x" and "v"
            wp.launch(scale, 4, inputs=[b], outputs=[c])  # b is "x_next" then "x"
        return tape

    tape = record()  # the arrays are not in this frame: names come from parameters
    labels = set(arrays_by_label(parse(tape.visualize(simplify_graph=False))))
    assert labels == {"x", "x_next", "y"}
    labels = set(arrays_by_label(parse(tape.visualize(simplify_graph=False,
                                                      choose_longest_node_name=False))))
    assert labels == {"v", "x", "y"}


# --------------------------------------------------------------------------- options


def test_hide_readonly_arrays_and_shared_nodes_in_a_scope():
    x, v = f32(4), f32(4)
    xs = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(3)]
    tape = wp.Tape()
    with tape:
        with wp.ScopedTimer("integrate", print=False):
            wp.launch(step, 4, inputs=[x, v, 0.1], outputs=[xs[0]])
            wp.launch(step, 4, inputs=[xs[0], v, 0.1], outputs=[xs[1]])
    graph = parse(tape.visualize(simplify_graph=False, hide_readonly_arrays=True))
    assert set(arrays_by_label(graph)) == {"xs[0]", "xs[1]"}  # x and v are never produced
    assert kernel_names(graph) == ["kernel0"]  # the second launch shares the first node
    graph = parse(tape.visualize(simplify_graph=False, hide_readonly_arrays=True,
                                 track_inputs=[x], track_input_names=["x0"]))
    assert "x0" in arrays_by_label(graph)


def test_ignore_graph_scopes_emits_no_cluster():
    tape, *_ = record_scoped_loop()
    assert clusters(parse(tape.visualize(ignore_graph_scopes=True))) == []


def test_callbacks_are_dropped_and_scopes_shifted():
    x, y, z = f32(4), wp.zeros(4, requires_grad=True), wp.zeros(4, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 4, inputs=[x], outputs=[y])
        tape.record_func(lambda: None, [x])
        tape.record_scope_begin("tail")
        wp.launch(scale, 4, inputs=[y], outputs=[z])
        tape.record_scope_end()
    graph = parse(tape.visualize(simplify_graph=False))
    (cluster,) = clusters(graph)
    assert [n.get_name() for n in cluster.get_nodes() if n.get_name().startswith("kernel")] \
        == ["kernel1"]
    assert kernel_names(graph) == ["kernel0", "kernel1"]


def test_ping_pong_loop_folds_with_a_feedback_edge():
    xs = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(2)]
    v = f32(4)
    tape = wp.Tape()
    with tape:
        for i in range(6):
            wp.launch(step, 4, inputs=[xs[i % 2], v, 0.1], outputs=[xs[(i + 1) % 2]])
    graph = parse(tape.visualize())
    assert [unquote(c.get("label")) for c in clusters(graph)] == ["<<b>repeated 6x</b>>"]
    arrays = arrays_by_label(graph)
    feedback = [(s, d) for s, d, e in all_edges(graph) if e.get("color")]
    assert feedback == [(arrays["xs[1]"], arrays["xs[0]"])]


def test_nested_repetitions_and_timer_scopes_per_iteration():
    x = f32(4)
    ys = [wp.zeros(4, dtype=float, requires_grad=True) for _ in range(13)]
    tape = wp.Tape()
    with tape:
        k = 0
        for _ in range(3):
            with wp.ScopedTimer("substeps", print=False):
                for _ in range(4):
                    wp.launch(scale, 4, inputs=[x], outputs=[ys[k]])
                    k += 1
    graph = parse(tape.visualize())
    labels = [unquote(c.get("label")) for c in clusters(graph)]
    assert labels == ["<<b>repeated 3x</b>>", "<<b>substeps (repeated 4x)</b>>"]
    assert kernel_names(graph) == ["kernel0"]


def test_struct_arguments_expand_into_fields():
    class Pair:
        def __init__(self, a, b):
            self.a, self.b = a, b

        def _difftape_struct_fields(self):
            return {"a": self.a, "b": self.b}

    from difftape._src.visualize import array_args

    a, b = f32(2), f32(2)
    assert [(name, arr is a or arr is b) for name, arr in array_args(Pair(a, b), "s")] == \
        [("s.a", True), ("s.b", True)]
    assert list(array_args(1.5, "dt")) == []


# --------------------------------------------------------------------------- rendering


@pytest.mark.skipif(shutil.which("dot") is None, reason="GraphViz 'dot' is not installed")
def test_renders_svg_with_dot(tmp_path):
    tape, *_ = record_scoped_loop()
    path = tmp_path / "tape.svg"
    tape.visualize(str(path))
    assert path.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_without_dot_writes_the_dot_file_and_says_how_to_render(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    tape, *_ = record_scoped_loop()
    path = tmp_path / "tape.png"
    with pytest.warns(wp.DiffTapeWarning, match=r"not installed.*dot -Tpng .*tape\.dot -o "):
        text = tape.visualize(str(path))
    assert not path.exists() and (tmp_path / "tape.dot").read_text() == text


# --------------------------------------------------------------------------- scopes and timer


def test_scoped_timer_records_nested_scopes_and_elapsed(capsys):
    x, y = f32(4), wp.zeros(4, requires_grad=True)
    tape = wp.Tape()
    timings: dict = {}
    with tape:
        with wp.ScopedTimer("outer", dict=timings) as outer:
            with wp.ScopedTimer("inner"):
                wp.launch(scale, 4, inputs=[x], outputs=[y])
            with wp.ScopedTimer("skipped", print=False, skip_tape=True):
                wp.launch(scale, 4, inputs=[x], outputs=[y])
    assert tape.scopes == [(0, "outer", {}), (0, "inner", {}), (1, None, None), (2, None, None)]
    assert outer.elapsed > 0.0 and timings["outer"] == [outer.elapsed]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("    inner took ") and lines[0].endswith(" ms")
    assert lines[1].startswith("outer took ")


def test_scoped_timer_without_tape_or_when_inactive():
    with wp.ScopedTimer("idle", active=False) as t:
        pass
    assert t.elapsed == 0.0
    tape = wp.Tape()
    with tape:
        with wp.ScopedTimer("empty", print=False):
            pass
    assert tape.scopes == []  # empty scopes disappear


# --------------------------------------------------------------------------- repeats


def keys(seq: str) -> list:
    return [Item(c, c) for c in seq]


def shape(pieces) -> list:
    return [("".join(i.key for i in p.block), p.count) if isinstance(p, Repeat) else p.key
            for p in pieces]


@pytest.mark.parametrize("seq, expected", [
    ("AAAA", [("A", 4)]),
    ("ABABAB", [("AB", 3)]),
    ("XABABY", ["X", ("AB", 2), "Y"]),
    ("ABC", ["A", "B", "C"]),
    ("AABAAB", [("AAB", 2)]),
    ("ABCABCABCD", [("ABC", 3), "D"]),
])
def test_find_repeats(seq, expected):
    assert shape(find_repeats(keys(seq))) == expected
