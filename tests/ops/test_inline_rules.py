"""The inline spellings of derivative rules in generated adjoints equal the registry's rules."""

import math

import numpy as np
import pytest

from difftape._src import dtypes
from difftape._src.codegen.inline_rules import INLINE_NEEDS, INLINE_RULES
from difftape._src.ops import registry


@pytest.mark.parametrize("key", sorted(INLINE_RULES))
def test_inline_rule_equals_registry_rule(key):
    rng = np.random.default_rng(len(key))
    record = registry.lookup(key)[0]
    arity = len(record.param_names)
    types = tuple(dtypes.bool_ if p == "cond" else dtypes.float64 for p in record.param_names)
    found = registry.resolve(key, types)
    assert found is not None and found[0] is record
    for trial in range(6):
        args = [float(v) for v in rng.uniform(0.5, 2.0, arity) * rng.choice([-1, 1], arity)]
        args = [bool(trial % 2) if t is dtypes.bool_ else abs(a) if key == "sqrt" else a
                for a, t in zip(args, types)]
        ret = record.forward(*args)
        g = float(rng.uniform(-2, 2))
        names = [f"a{k}" for k in range(arity)]
        env = dict(zip(names, args), ret=ret, g=g)
        spelled = INLINE_RULES[key](*names, "ret", "g", "0.0")
        helpers = {"rt_sincos": lambda x: (math.sin(x), math.cos(x))}  # cpu_runtime's, in Python
        inline = [None if text is None else eval(text, helpers, env)  # noqa: S307 - templates
                  for text in spelled]
        expected = record.adjoint(*args, ret, g)
        for k, (a, b) in enumerate(zip(inline, expected)):
            if not record.differentiable.get(record.param_names[k], True):
                continue
            assert math.isclose(a, b, rel_tol=1e-12), (key, args, inline, expected)
        for need in INLINE_NEEDS[key]:
            assert need == "ret" or 0 <= need < arity
