"""``difftape.autograd``'s implementation: Jacobians by the tape and by finite differences, gradient checks, plots."""
