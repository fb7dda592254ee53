"""The inline spellings of + - * / rules in generated adjoints equal the registry's rules."""

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
    found = registry.resolve(key, (dtypes.float64,) * arity)
    assert found is not None and found[0] is record
    for _ in range(5):
        args = [float(v) for v in rng.uniform(0.5, 2.0, arity) * rng.choice([-1, 1], arity)]
        ret = record.forward(*args)
        g = float(rng.uniform(-2, 2))
        names = [f"a{k}" for k in range(arity)]
        env = dict(zip(names, args), ret=ret, g=g)
        spelled = INLINE_RULES[key](*names, "ret", "g")
        inline = [eval(text, {}, env) for text in spelled]  # noqa: S307 - our own templates
        expected = record.adjoint(*args, ret, g)
        for a, b in zip(inline, expected):
            assert math.isclose(a, b, rel_tol=1e-12), (key, args, inline, expected)
        for need in INLINE_NEEDS[key]:
            assert need == "ret" or 0 <= need < arity
