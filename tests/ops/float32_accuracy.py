"""Comparing float32 results with a float64 reference, for the tests of the CPU backend's
float32 math (``backends/cpu_trig.py``, ``cpu_inverse_trig.py``, ``cpu_exp.py``)."""

import numpy as np


def ulp_errors(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the last place of ``exact`` rounded to float32 (0.5: correctly
    rounded); where that rounding overflows, 0 if ``got`` is the same infinity, else inf."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow, then inf - inf
        rounded = exact.astype(np.float32)
        ulp = np.spacing(np.abs(rounded)).astype(np.float64)
        errors = np.abs(got.astype(np.float64) - exact) / ulp
    overflow = np.isinf(rounded)
    errors[overflow] = np.where(got[overflow] == rounded[overflow], 0.0, np.inf)
    return errors


def same_values(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Elementwise: equal with the same sign (so -0 is not 0), or both NaN."""
    return np.where(np.isnan(expected), np.isnan(got),
                    (got == expected) & (np.signbit(got) == np.signbit(expected)))
