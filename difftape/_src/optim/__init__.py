"""Gradient-descent optimizers (Warp's ``warp.optim``): ``Adam`` and ``SGD``.

The update rules are difftape kernels launched on flat scalar views of the parameters; nothing
here is recorded on a tape or differentiated. The public names are re-exported by
``difftape/optim.py``.
"""
