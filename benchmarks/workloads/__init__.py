"""Warp-style benchmark workloads.

Each module here is written against the Warp API but imports neither warp nor difftape: the runner
loads it with ``importlib`` and sets ``module.wp`` (warp or difftape) before executing it, so the
very same kernel source runs under both libraries.

Module interface (all functions take plain Python / numpy values unless noted):
    NAME, REQUIRES            label, and the ``wp`` attributes the module needs (else "n/a")
    make_inputs(scale, seed)  numpy inputs (library independent, float32/int32)
    reference(inputs)         float64 numpy gradients {name: array}
    setup(inputs)             library arrays (a dict "state")
    prepare(state)            untimed: zero outputs, loss and every gradient buffer
    forward(state)            the launches (the runner wraps them in ``with tape:``)
    loss(state)               the loss array passed to ``tape.backward``
    gradients(state)          {name: numpy array} to compare with ``reference``
"""
