"""``jacobian_plot``: a matplotlib grid of Jacobian blocks (rows = outputs, columns = inputs).

matplotlib is optional and imported only here, when a plot is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..kernel import Kernel
from .jacobian import FunctionMetadata


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError("jacobian_plot needs matplotlib: pip install matplotlib (or "
                          "pip install 'difftape[plot]')") from err
    return plt


def jacobian_plot(jacobians: dict, kernel_or_metadata: FunctionMetadata | Kernel,
                  inputs: Sequence | None = None, show_plot: bool = True,
                  show_colorbar: bool = True, scale_colors_per_submatrix: bool = False,
                  title: str | None = None, colormap: str = "coolwarm", log_scale: bool = False):
    """Plot Jacobians from ``jacobian``/``jacobian_fd`` as one image per (output, input) block.

    Args:
        jacobians: ``{(input index, output index): array}``.
        kernel_or_metadata: The kernel (then ``inputs`` is required) or a ``FunctionMetadata``.
        inputs: The kernel's inputs, for labels.
        show_plot: Call ``plt.show()``.
        show_colorbar: Draw a colour bar (one per block with ``scale_colors_per_submatrix``).
        scale_colors_per_submatrix: Scale colours per block instead of globally.
        title: Figure title (default ``"{key} kernel Jacobian"``).
        colormap: A matplotlib colormap name.
        log_scale: Show ``log10(|J| + 1e-8)``.

    Returns:
        The matplotlib figure, or None when there is nothing to plot.

    Raises:
        ImportError: matplotlib is not installed.
        ValueError: a kernel without ``inputs``, or another kind of second argument.
    """
    if isinstance(kernel_or_metadata, Kernel):
        if inputs is None:
            raise ValueError("inputs must be provided when kernel is a Warp kernel")
        metadata = FunctionMetadata()
        metadata.update_from_kernel(kernel_or_metadata, inputs)
    elif isinstance(kernel_or_metadata, FunctionMetadata):
        metadata = kernel_or_metadata
    else:
        raise ValueError("Invalid kernel argument: must be a Warp kernel or a FunctionMetadata "
                         "object")
    plt = _pyplot()
    blocks = dict(sorted(jacobians.items(), key=lambda kv: (kv[0][1], kv[0][0])))
    cols = sorted({i for i, _ in blocks})
    rows = sorted({o for _, o in blocks})
    if not rows or not cols:
        return None
    matrices = {key: jac.numpy().reshape(jac.shape[0], -1) for key, jac in blocks.items()}
    widths = [next(m.shape[1] for (i, _), m in matrices.items() if i == c) for c in cols]
    heights = [next(m.shape[0] for (_, o), m in matrices.items() if o == r) for r in rows]
    fig, axes = plt.subplots(nrows=len(rows), ncols=len(cols), figsize=(7, 7),
                             layout="constrained", squeeze=False,
                             gridspec_kw={"width_ratios": widths, "height_ratios": heights})
    fig.suptitle(title or f"{metadata.key or 'unknown'} kernel Jacobian")
    values = [m[~np.isnan(m)] for m in matrices.values()]
    values = [v for v in values if v.size]
    vmin = min((v.min() for v in values), default=0.0)
    vmax = max((v.max() for v in values), default=0.0)
    for r, o in enumerate(rows):
        for c, i in enumerate(cols):
            ax = axes[r, c]
            if (i, o) not in matrices:
                ax.axis("off")
                continue
            m = matrices[i, o]
            shown = np.log10(np.abs(m) + 1e-8) if log_scale else m
            low, high = (np.nanmin(m), np.nanmax(m)) if scale_colors_per_submatrix else (vmin, vmax)
            image = ax.imshow(shown, cmap=colormap, aspect="auto", interpolation="nearest",
                              vmin=low, vmax=high)
            if r == len(rows) - 1:
                ax.set_xlabel(metadata.input_labels[i])
            if c == 0:
                ax.set_ylabel(metadata.output_labels[o])
            if show_colorbar and scale_colors_per_submatrix:
                plt.colorbar(image, ax=ax)
    if show_colorbar and not scale_colors_per_submatrix:
        mappable = plt.cm.ScalarMappable(cmap=colormap)
        mappable.set_clim(vmin, vmax)
        plt.colorbar(mappable, ax=axes)
    if show_plot:
        plt.show()
    return fig

