"""Gradient-descent optimizers, as ``warp.optim``: ``import difftape.optim``, then
``difftape.optim.Adam(params, lr=...)`` or ``difftape.optim.SGD(...)``. This file only
re-exports."""

from difftape._src.optim.adam import Adam as Adam
from difftape._src.optim.sgd import SGD as SGD
