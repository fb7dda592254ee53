"""Code generation: typed IR → readable forward and adjoint Python source."""
