"""Device names and discovery: the CPU device, the default device, and CUDA availability.

This module only names devices and answers questions about them; it never allocates memory or
launches work (arrays live in ``array.py``, launches in ``launch.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from difftape._src.errors import LaunchError


class Device:
    """A device arrays can live on and kernels can run on; today only ``"cpu"`` exists.

    A Device compares equal to its alias string, so ``a.device == "cpu"`` works as in Warp.

    Attributes:
        alias: The device string, ``"cpu"``.
        ordinal: ``-1`` for the CPU, as in Warp.
        name: A readable name for messages.
    """

    def __init__(self, alias: str, ordinal: int = -1, name: str = "CPU"):
        self.alias = alias
        self.ordinal = ordinal
        self.name = name
        self.is_capturing = False

    @property
    def is_cpu(self) -> bool:
        """True for the host CPU."""
        return self.alias == "cpu"

    @property
    def is_cuda(self) -> bool:
        """True for a CUDA device (never, on this build)."""
        return self.alias.startswith("cuda")

    def __str__(self) -> str:
        return self.alias

    def __repr__(self) -> str:
        return f"'{self.alias}'"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Device):
            return self.alias == other.alias
        if isinstance(other, str):
            return self.alias == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.alias)


_CPU = Device("cpu")
_default_device: Device = _CPU


def get_device(ident: Device | str | None = None) -> Device:
    """Return the Device for a device identifier.

    Args:
        ident: ``None`` for the default device, ``"cpu"``, or a Device.

    Returns:
        The matching Device.

    Raises:
        LaunchError: for ``"cuda"``/``"cuda:N"`` (no CUDA on this machine) or an unknown
            identifier. LaunchError is a RuntimeError, which is what Warp raises.
    """
    if ident is None:
        return _default_device
    if isinstance(ident, Device):
        ident = ident.alias
    if ident == "cpu":
        return _CPU
    if isinstance(ident, str) and (ident == "cuda" or ident.startswith("cuda:")):
        raise LaunchError(
            f"CUDA is not available on this machine, so device '{ident}' cannot be used. "
            "difftape runs on 'cpu' here; pass device='cpu' or leave device unset."
        )
    raise LaunchError(f"Invalid device identifier: {ident!r}; expected 'cpu', 'cuda' or 'cuda:N'")


def set_device(ident: Device | str | None) -> None:
    """Make ``ident`` the default device (only ``"cpu"`` is available)."""
    global _default_device
    _default_device = get_device(ident)


def get_preferred_device() -> Device:
    """The device Warp would pick first: CUDA when available, else the CPU."""
    return _CPU


def get_devices() -> list[Device]:
    """All devices available on this machine."""
    return [_CPU]


def is_cuda_available() -> bool:
    """False: this build runs kernels on the CPU only."""
    return False


def get_cuda_device_count() -> int:
    """The number of CUDA devices (0)."""
    return 0


def get_cuda_devices() -> list[Device]:
    """The CUDA devices (none)."""
    return []


def get_cuda_device(ordinal: int | None = None) -> Device:
    """A CUDA device: there is none, so this raises LaunchError (as ``get_device("cuda")``)."""
    return get_device("cuda" if ordinal is None else f"cuda:{ordinal}")


def init() -> None:
    """Initialize the runtime. Nothing needs initializing on the CPU; safe to call repeatedly."""


def load_module(module=None, device: Device | str | None = None, recursive: bool = False) -> None:
    """Warp compiles a module's kernels here; difftape compiles each kernel at its first launch
    (its argument types choose the code), so this validates the device and returns."""
    get_device(device)


def force_load(device: Device | str | None = None, modules=None) -> None:
    """Warp compiles every loaded module here; difftape compiles at first launch (see
    ``load_module``), so this validates the device and returns."""
    get_device(device)


def synchronize() -> None:
    """Wait for all outstanding work; CPU work is synchronous, so this returns at once."""


def synchronize_device(device: Device | str | None = None) -> None:
    """Wait for outstanding work on ``device``; validates the device, then returns at once."""
    get_device(device)


@contextmanager
def ScopedDevice(device: Device | str | None) -> Iterator[Device]:  # noqa: N802 (Warp's name)
    """Make ``device`` the default device inside a ``with`` block, then restore the previous one."""
    global _default_device
    previous = _default_device
    _default_device = get_device(device)
    try:
        yield _default_device
    finally:
        _default_device = previous
