"""``Tape.visualize``: the recorded launches as GraphViz dot text, laid out as Warp lays it out (SPEC §1.11).

Kernel records become table nodes with one port per parameter, arrays become ellipses coloured
by ``requires_grad`` (struct arguments expand into their array fields, ``"{arg}.{field}"``),
tape scopes become clusters, and runs of repeated launch sequences fold into their first
instance inside a ``"repeated Nx"`` cluster (``repeats.py`` finds them). Arrays are named after
the caller's variables when one refers to them. ``render`` writes the text, or an image through
the GraphViz ``dot`` program; ``tape_svg``, ``tape_markdown`` and ``tape_repr`` are the Tape's
notebook and text displays. This module only reads the tape.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings
from dataclasses import dataclass, field

from . import dtypes
from .array import array
from .caller import user_frame, variable_names
from .errors import DiffTapeWarning
from .repeats import Item, Repeat, find_repeats

GREEN, BLUE = "#76B900", "#0072B9"
HEADER = """digraph " " {{
    graph [fontname="Helvetica,Arial,sans-serif",tooltip=" "];
    node [style=rounded,shape=plaintext,fontname="Helvetica,Arial,sans-serif", margin="0.05,0.02", width=0, height=0, tooltip=" "];
    edge [fontname="Helvetica,Arial,sans-serif",tooltip=" "];
    rankdir={direction};

{body}
}}
"""
IMAGE_FORMATS = {".svg", ".png", ".pdf", ".jpg", ".jpeg", ".gif", ".ps"}
_HTML = {"[": "&#91;", "]": "&#93;", "`": "&#96;", ":": "&#58;", "\\": "\\\\", "/": "&#47;",
         "(": "&#40;", ")": "&#41;", "{": "&#123;", "}": "&#125;", "<": "&#60;", ">": "&#62;"}


def sanitize(text: str) -> str:
    """Warp's tooltip sanitizer: HTML entities for markup characters, no quotes or commas."""
    text = text.replace("\n", " ").replace('"', " ").replace("'", " ").replace(",", "")
    return "".join(_HTML.get(c, c) for c in text)


def struct_fields(value: object) -> dict[str, object] | None:
    """A struct instance's fields by name (``_difftape_struct_fields()``), or None for non-structs."""
    fields = getattr(value, "_difftape_struct_fields", None)
    if callable(fields):
        return dict(fields())
    if getattr(type(value), "_difftape_struct", None) is not None and hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    return None


def array_args(value: object, name: str):
    """``(name, array)`` for an array argument, or for every array field of a struct argument."""
    if isinstance(value, array):
        yield name, value
        return
    fields = struct_fields(value)
    for field_name, field_value in (fields or {}).items():
        yield from array_args(field_value, f"{name}.{field_name}")


# ------------------------------------------------------------ the tape as a tree


@dataclass
class Launch:
    """One kernel record kept in the graph."""

    record: list
    index: int  # among the tape's kernel records

    @property
    def kernel(self):
        return self.record[0]

    def key(self) -> str:
        caller = self.record[7].get("caller") if isinstance(self.record[7], dict) else None
        where = f"{caller['file']}{caller['func']}{caller['lineno']}" if caller else ""
        return f"{self.kernel.module}.{self.kernel.key}{hash(where) if caller else ''}"


@dataclass
class Cluster:
    """A scope (user scope or repetition) and what it contains."""

    name: str
    repeated: bool
    children: list = field(default_factory=list)


def scope_tree(tape) -> Cluster:
    """Kernel records nested in the tape's scopes (callbacks dropped, scope indices shifted)."""
    root = Cluster("", False)
    stack = [root]
    scopes = sorted(enumerate(tape.scopes), key=lambda s: (s[1][0], s[0]))
    position = 0
    kernel_index = 0
    for index, record in enumerate(tape.launches + [None]):
        while position < len(scopes) and scopes[position][1][0] <= index:
            _, (_, name, metadata) = scopes[position]
            if name is not None:
                cluster = Cluster(name, (metadata or {}).get("type") == "repeated")
                stack[-1].children.append(cluster)
                stack.append(cluster)
            elif len(stack) > 1:
                stack.pop()
            position += 1
        if isinstance(record, (list, tuple)):
            stack[-1].children.append(Launch(record, kernel_index))
            kernel_index += 1
    return root


def signature(node) -> object:
    """What makes two launches or scopes 'the same' for repetition folding."""
    if isinstance(node, Launch):
        return node.key()
    return ("scope", node.name, tuple(signature(c) for c in node.children))


def launches_of(node) -> list[Launch]:
    if isinstance(node, Launch):
        return [node]
    return [launch for child in node.children for launch in launches_of(child)]


class Folder:
    """Folds repeated runs, remembering which arrays of later iterations map to the first's."""

    def __init__(self):
        self.array_repeated: dict[int, int] = {}  # ptr in a folded iteration → ptr in the first
        self.feedback: set[tuple[int, int]] = set()  # (output ptr, input ptr) across iterations

    def fold(self, cluster: Cluster) -> Cluster:
        children = [self.fold(c) if isinstance(c, Cluster) else c for c in cluster.children]
        out = Cluster(cluster.name, cluster.repeated)
        self.fold_sequence(children, out, cluster)
        return out

    def fold_sequence(self, children: list, out: Cluster, parent: Cluster | None) -> None:
        for piece in find_repeats([Item(signature(c), c) for c in children]):
            if not isinstance(piece, Repeat):
                out.children.append(piece.value)
                continue
            self.map_iterations(piece)
            label = f"repeated {piece.count}x"
            inner = Cluster(label, True)
            self.fold_sequence([item.value for item in piece.block], inner, None)
            if piece.whole and parent is not None and parent.name and not parent.repeated:
                out.name, out.repeated = f"{parent.name} ({label})", True  # the scope is the loop
                out.children.extend(inner.children)
            else:
                out.children.append(inner)

    def map_iterations(self, piece: Repeat) -> None:
        iterations = [[launch for item in block for launch in launches_of(item.value)]
                      for block in piece.iterations()]
        first = iterations[0]
        first_ptrs = {ptr for launch in first for _, _, a in _arrays(launch) for ptr in [a.ptr]}
        outputs = {a.ptr for launch in first for _, out, a in _arrays(launch) if out}
        for later in iterations[1:]:
            for launch, origin in zip(later, first):
                for (k, _, a), (_, _, b) in zip(_arrays(launch), _arrays(origin)):
                    if a.ptr not in first_ptrs:
                        self.array_repeated.setdefault(a.ptr, b.ptr)
        if len(iterations) > 1:  # outputs of iteration 1 read by iteration 2 feed back
            for launch, origin in zip(iterations[1], first):
                for (_, out, a), (_, _, b) in zip(_arrays(launch), _arrays(origin)):
                    if not out and a.ptr in outputs and a.ptr != b.ptr:
                        self.feedback.add((a.ptr, b.ptr))


def _arrays(launch: Launch) -> list[tuple[int, bool, array]]:
    """``(position, is_output, array)`` for every non-empty array a launch was given."""
    kernel, inputs, outputs = launch.record[0], launch.record[3], launch.record[4]
    found = []
    for position, value in enumerate(list(inputs) + list(outputs)):
        for _, a in array_args(value, ""):
            if a.size > 0:
                found.append((position, position >= len(inputs), a))
    return found


# ------------------------------------------------------------ dot text


@dataclass
class Options:
    """The keyword options of ``Tape.visualize`` (SPEC §1.11)."""

    simplify_graph: bool = True
    hide_readonly_arrays: bool = False
    array_labels: dict | None = None
    choose_longest_node_name: bool = True
    ignore_graph_scopes: bool = False
    track_inputs: list | None = None
    track_outputs: list | None = None
    track_input_names: list | None = None
    track_output_names: list | None = None
    graph_direction: str = "LR"


class DotWriter:
    """Emits the body lines: clusters, kernel tables, array nodes (labelled last), edges."""

    def __init__(self, options: Options, caller_names: dict[int, str], folder: Folder):
        self.o = options
        self.caller_names = caller_names
        self.folder = folder
        self.lines: list = []  # str, or an array ptr whose node line is written at the end
        self.nodes: dict[int, array] = {}
        self.fixed: dict[int, str] = {}  # labels that automatic naming never replaces
        self.labels: dict[int, str] = {}
        self.edges: set[tuple[str, str]] = set()
        self.computed: set[int] = set()
        self.kernel_count = 0
        self.clusters = 0
        self.scope_kernels: dict[str, int] = {}
        labels = options.array_labels or {}
        self.custom = {id(a): name for a, name in labels.items()} if labels else {}

    # -- arrays --------------------------------------------------------------------------

    def add_array(self, a: array, name: str, indent: int, fixed: bool = False) -> None:
        ptr = a.ptr
        custom = self.custom.get(id(a))
        if custom is not None:
            self.fixed[ptr] = custom
        elif fixed:
            self.fixed.setdefault(ptr, name)
        elif ptr not in self.fixed:
            caller = self.caller_names.get(id(a))
            if caller is not None:
                self.fixed[ptr] = caller
            elif ptr not in self.labels or not self.o.choose_longest_node_name or \
                    len(name) > len(self.labels[ptr]):
                self.labels[ptr] = name
        if ptr not in self.nodes:
            self.nodes[ptr] = a
            self.lines.append((indent, ptr))

    def node_line(self, indent: int, ptr: int) -> str:
        a = self.nodes[ptr]
        label = self.fixed.get(ptr) or self.labels.get(ptr) or ""
        color = GREEN if a.requires_grad else "lightgray"
        tooltip = (f"Array {label} / ptr={ptr}, shape={a.shape}, "
                   f"dtype={dtypes.type_name(a.dtype)}, requires_grad={a.requires_grad}")
        options = [f'label="{label}"', "shape=ellipse", "style=filled",
                   f'fillcolor="{color}"', f'tooltip="{tooltip}"']
        return f"{chr(9) * indent}arr{ptr} [{','.join(options)}];"

    def edge(self, indent: int, source: str, target: str, suffix: str = "") -> None:
        if (source, target) in self.edges:
            return
        self.edges.add((source, target))
        self.lines.append(f"{chr(9) * indent}{source} -> {target}{suffix}")

    # -- structure -----------------------------------------------------------------------

    def write(self, node, indent: int) -> None:
        if isinstance(node, Launch):
            return self.launch(node, indent)
        if self.o.ignore_graph_scopes or not node.name:
            for child in node.children:
                self.write(child, indent)
            return
        tab = chr(9)
        fill, pen = (BLUE, BLUE) if node.repeated else (GREEN, GREEN)
        self.lines += [f"{tab * indent}subgraph cluster{self.clusters} {{",
                       f'{tab * (indent + 1)}style="rounded,filled";',
                       f'{tab * (indent + 1)}fillcolor="{fill}22";',
                       f'{tab * (indent + 1)}pencolor="{pen}";',
                       f"{tab * (indent + 1)}label=<<b>{node.name}</b>>;\n"]
        self.clusters += 1
        self.scope_kernels = {}
        for child in node.children:
            self.write(child, indent + 1)
        self.lines.append(f"{tab * indent}}};\n")
        self.scope_kernels = {}

    def launch(self, launch: Launch, indent: int) -> None:
        kernel, inputs, outputs = launch.kernel, list(launch.record[3]), list(launch.record[4])
        number = self.kernel_count
        self.kernel_count += 1
        shared = self.o.hide_readonly_arrays and not self.o.ignore_graph_scopes
        rendered = not shared or kernel.key not in self.scope_kernels
        if rendered:
            self.scope_kernels[kernel.key] = number
        node = f"kernel{self.scope_kernels[kernel.key] if shared else number}"
        if rendered:
            self.lines.append(kernel_node(kernel, node, launch.record, len(inputs),
                                          len(outputs), indent))
        names = [p.name for p in kernel.ir.params]
        tracked = self.tracked
        for i, value in enumerate(inputs):
            label = names[i] if i < len(names) else f"in_{i}"
            for name, a in array_args(value, label):
                if a.size == 0:
                    continue
                ptr = a.ptr
                if self.o.hide_readonly_arrays and ptr not in self.computed and ptr not in tracked:
                    continue
                if ptr in self.folder.array_repeated:
                    ptr = self.folder.array_repeated[ptr]
                else:
                    self.add_array(a, name, indent)
                if ptr in self.nodes:
                    self.edge(indent, f"arr{ptr}", f"{node}:in_{i}")
        for i, value in enumerate(outputs):
            position = i + len(inputs)
            label = names[position] if position < len(names) else f"out_{i}"
            for name, a in array_args(value, label):
                if a.size == 0:
                    continue
                self.add_array(a, name, indent)
                self.computed.add(a.ptr)
                self.edge(indent, f"{node}:out_{i}", f"arr{a.ptr}", ";")

    def text(self, root: Cluster) -> str:
        o = self.o
        self.tracked = set()
        for group, names, default in ((o.track_inputs, o.track_input_names, "input"),
                                      (o.track_outputs, o.track_output_names, "output")):
            for i, a in enumerate(group or []):
                given = names[i] if names and i < len(names) else f"{default}_{i}"
                self.add_array(a, given, 0, fixed=True)
                self.tracked.add(a.ptr)
        self.computed |= {a.ptr for a in o.track_outputs or []}
        self.write(root, 0)
        for src, dst in sorted(self.folder.feedback):
            if src in self.nodes and dst in self.nodes and src != dst:
                self.edge(0, f"arr{src}", f"arr{dst}", f' [color="{BLUE}",constraint=false];')
        body = [line if isinstance(line, str) else self.node_line(*line) for line in self.lines]
        return HEADER.format(direction=o.graph_direction, body="\n".join(body))


def kernel_node(kernel, node: str, record: list, n_inputs: int, n_outputs: int,
                indent: int) -> str:
    """The HTML-table node of one launch: a header, then input and output ports."""
    params = kernel.ir.params
    table = ['<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" border="0" cellspacing="2" '
             'cellpadding="4" bgcolor="#888888" gradientangle="0">',
             f'<TR><TD BGCOLOR="#ffffffaa" colspan="2" align="center"><b>{kernel.key}</b>'
             '</TD></TR>']
    for i in range(max(n_inputs, n_outputs)):
        if i < n_inputs and i < len(params):
            p = params[i]
            title = (f"array: dtype={dtypes.type_name(p.dtype)}" if p.is_array
                     else f"dtype={sanitize(dtypes.type_name(p.dtype))}")
            left = (f'<TD PORT="in_{i}" BGCOLOR="#BBBBBB" align="left" title="{title}">'
                    f'<font color="black">{p.name}</font></TD>')
        else:
            left = '<TD BORDER="0"></TD>'
        if i < n_outputs and i + n_inputs < len(params):
            right = (f'<TD PORT="out_{i}" BGCOLOR="#BBBBBB" align="right"><font color="black">'
                     f'{params[i + n_inputs].name}</font></TD>')
        else:
            right = '<TD BORDER="0"></TD>'
        table.append(f"<TR>{left}{right}</TR>")
    table.append("</TABLE>")
    tab = chr(9) * indent
    attrs = "label=<" + f"{tab}\n".join(table) + ">"
    caller = record[7].get("caller") if isinstance(record[7], dict) else None
    if caller:
        attrs += f',tooltip="{sanitize(caller["file"])}:{caller["lineno"]} ({caller["func"]})"'
    return f"{tab}{node} [{attrs}];"


def visualize_tape(tape, filename: str | None = None, caller=None, **options) -> str:
    """Dot text for ``tape`` (see ``Tape.visualize``), written or rendered to ``filename``."""
    o = Options(**options)
    folder = Folder()
    root = scope_tree(tape)
    if o.simplify_graph:
        root = folder.fold(root)
    names = variable_names(caller if caller is not None else user_frame(1))
    text = DotWriter(o, names, folder).text(root)
    if filename is not None:
        render(text, os.fspath(filename))
    return text


def render(text: str, filename: str) -> None:
    """Write dot text, or an image when ``filename`` has an image suffix and ``dot`` exists."""
    stem, suffix = os.path.splitext(filename)
    if suffix.lower() not in IMAGE_FORMATS:
        with open(filename, "w") as f:
            f.write(text)
        return
    dot = shutil.which("dot")
    if dot is not None:
        result = subprocess.run([dot, f"-T{suffix[1:].lower()}", "-o", filename],
                                input=text.encode(), capture_output=True, check=False)
        if result.returncode == 0:
            return
        problem = f"GraphViz 'dot' failed: {result.stderr.decode(errors='replace').strip()}"
    else:
        problem = "the GraphViz 'dot' program is not installed"
    with open(stem + ".dot", "w") as f:
        f.write(text)
    warnings.warn(
        f"Tape.visualize could not render {filename} because {problem}; the graph was written "
        f"to {stem}.dot instead. Install GraphViz (apt-get install graphviz, brew install "
        f"graphviz or conda install graphviz), then run: dot -T{suffix[1:].lower()} {stem}.dot "
        f"-o {filename}", DiffTapeWarning, stacklevel=4)


# ------------------------------------------------------------ notebooks

_MAX_TABLE_ROWS = 40


def _notebook_frame() -> object:
    """A frame-like view of the notebook's namespace (``__main__``), for naming arrays.

    Jupyter calls ``_repr_svg_`` from its display machinery, so the caller's frame holds no user
    variables; the user's cells run in ``__main__``.
    """
    import sys
    import types

    main = sys.modules.get("__main__")
    return types.SimpleNamespace(f_locals={}, f_globals=dict(vars(main)) if main else {})


def tape_svg(tape) -> str | None:
    """The tape's graph as SVG text through GraphViz ``dot``, or None without a working ``dot``."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    text = visualize_tape(tape, caller=_notebook_frame())
    try:
        result = subprocess.run([dot, "-Tsvg"], input=text.encode(), capture_output=True,
                                check=False, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.decode(errors="replace") if result.returncode == 0 else None


def _counts(tape) -> tuple[int, int]:
    kernels = sum(1 for r in tape.launches if isinstance(r, (list, tuple)))
    return kernels, len(tape.launches) - kernels


def tape_repr(tape) -> str:
    """One line: how many launches and callbacks, which kernels, how many gradient buffers."""
    kernels, callbacks = _counts(tape)
    keys: list[str] = []
    for record in tape.launches:
        if isinstance(record, (list, tuple)) and record[0].key not in keys:
            keys.append(record[0].key)
    shown = ", ".join(keys[:8]) + (", ..." if len(keys) > 8 else "")
    text = f"<difftape.Tape: {kernels} launch{'es' if kernels != 1 else ''}"
    text += f" ({shown})" if keys else ""
    text += f", {callbacks} callback{'s' if callbacks != 1 else ''}" if callbacks else ""
    return text + f", {len(tape.gradients)} gradient buffers>"


def _array_labels(values, params: list[str], offset: int, names: dict[int, str]) -> str:
    """The arrays among ``values`` named by the notebook's variables, else by parameter."""
    found = []
    for i, value in enumerate(values):
        param = params[offset + i] if offset + i < len(params) else f"arg{offset + i}"
        found += [names.get(id(a), label) for label, a in array_args(value, param)]
    return ", ".join(found)


def tape_markdown(tape) -> str:
    """A markdown table of the records (kernel, dim, arrays by the notebook's variable names)."""
    names = variable_names(_notebook_frame())  # type: ignore[arg-type]
    kernels, callbacks = _counts(tape)
    lines = [f"**difftape.Tape**: {kernels} kernel launches, {callbacks} callbacks, "
             f"{len(tape.gradients)} gradient buffers", ""]
    if not tape.launches:
        return "\n".join(lines + ["(nothing recorded)"])
    lines += ["| # | record | dim | inputs | outputs |", "|---|---|---|---|---|"]
    for index, record in enumerate(tape.launches[:_MAX_TABLE_ROWS]):
        if not isinstance(record, (list, tuple)):
            name = getattr(record, "__qualname__", type(record).__name__)
            lines.append(f"| {index} | callback `{name}` | | | |")
            continue
        kernel, dim, _, inputs, outputs = record[:5]
        params = [p.name for p in kernel.ir.params]
        ins = _array_labels(inputs, params, 0, names)
        outs = _array_labels(outputs, params, len(inputs), names)
        lines.append(f"| {index} | `{kernel.key}` | {dim} | {ins} | {outs} |")
    if len(tape.launches) > _MAX_TABLE_ROWS:
        lines.append(f"| ... | {len(tape.launches) - _MAX_TABLE_ROWS} more records | | | |")
    return "\n".join(lines)
