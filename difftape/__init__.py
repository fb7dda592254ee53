"""difftape: differentiable compute kernels in Python, Warp-compatible (``import difftape as wp``).

Kernels are parsed from Python, compiled with Numba to a forward and an adjoint kernel, recorded
on a Tape, and differentiated exactly with ``tape.backward()``. This file only re-exports.
"""

# category: version
from difftape._src.version import __version__ as __version__

# category: scalar types
from difftape._src.dtypes import bool_ as bool  # noqa: A001 (Warp's name)
from difftape._src.dtypes import float16 as float16
from difftape._src.dtypes import float32 as float32
from difftape._src.dtypes import float64 as float64
from difftape._src.dtypes import int8 as int8
from difftape._src.dtypes import int16 as int16
from difftape._src.dtypes import int32 as int32
from difftape._src.dtypes import int64 as int64
from difftape._src.dtypes import uint8 as uint8
from difftape._src.dtypes import uint16 as uint16
from difftape._src.dtypes import uint32 as uint32
from difftape._src.dtypes import uint64 as uint64

# category: arrays
from difftape._src.array import array as array
from difftape._src.array import array1d as array1d
from difftape._src.array import array2d as array2d
from difftape._src.array import array3d as array3d
from difftape._src.array import array4d as array4d
from difftape._src.array import copy as copy
from difftape._src.array_ops import clone as clone
from difftape._src.array_ops import empty as empty
from difftape._src.array_ops import empty_like as empty_like
from difftape._src.array_ops import from_numpy as from_numpy
from difftape._src.array_ops import full as full
from difftape._src.array_ops import full_like as full_like
from difftape._src.array_ops import ones as ones
from difftape._src.array_ops import ones_like as ones_like
from difftape._src.array_ops import zeros as zeros
from difftape._src.array_ops import zeros_like as zeros_like

# category: devices
from difftape._src.device import Device as Device
from difftape._src.device import ScopedDevice as ScopedDevice
from difftape._src.device import get_cuda_device_count as get_cuda_device_count
from difftape._src.device import get_device as get_device
from difftape._src.device import get_devices as get_devices
from difftape._src.device import get_preferred_device as get_preferred_device
from difftape._src.device import init as init
from difftape._src.device import is_cuda_available as is_cuda_available
from difftape._src.device import set_device as set_device
from difftape._src.device import synchronize as synchronize
from difftape._src.device import synchronize_device as synchronize_device

# category: kernels and launches
from difftape._src.kernel import Function as Function
from difftape._src.kernel import Kernel as Kernel
from difftape._src.kernel import func as func
from difftape._src.kernel import get_module_options as get_module_options
from difftape._src.kernel import kernel as kernel
from difftape._src.kernel import set_module_options as set_module_options
from difftape._src.launch import Launch as Launch
from difftape._src.launch import launch as launch
from difftape._src.language import constant as constant
from difftape._src.language import select as select
from difftape._src.language import tid as tid

# category: tape
from difftape._src.tape import Tape as Tape

# category: configuration and errors
from difftape._src import config as config
from difftape._src.config import LOG_DEBUG as LOG_DEBUG
from difftape._src.config import LOG_ERROR as LOG_ERROR
from difftape._src.config import LOG_INFO as LOG_INFO
from difftape._src.config import LOG_WARNING as LOG_WARNING
from difftape._src.errors import ArrayIndexError as ArrayIndexError
from difftape._src.errors import DiffTapeError as DiffTapeError
from difftape._src.errors import DiffTapeWarning as DiffTapeWarning
from difftape._src.errors import InternalError as InternalError
from difftape._src.errors import KernelError as KernelError
from difftape._src.errors import KernelNameError as KernelNameError
from difftape._src.errors import KernelSyntaxError as KernelSyntaxError
from difftape._src.errors import KernelTypeError as KernelTypeError
from difftape._src.errors import LaunchError as LaunchError
from difftape._src.errors import LaunchTypeError as LaunchTypeError
from difftape._src.errors import LaunchValueError as LaunchValueError
from difftape._src.errors import TapeError as TapeError

# category: builtins (every registry record, by its Warp name: sin, min, atomic_add, where, ...)
from difftape._src.ops.public import *  # noqa: E402,F401,F403
