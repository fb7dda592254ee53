"""difftape: differentiable compute kernels in Python, Warp-compatible (``import difftape as wp``).

Kernels are parsed from Python, compiled with Numba to a forward and an adjoint kernel, recorded
on a Tape, and differentiated exactly with ``tape.backward()``. This file only re-exports (with the
collector paused and its dataclasses' compiled code reused: ``_src/startup.py``).
"""

from difftape._src import startup as _startup

_startup.begin_import()

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

# category: vector, matrix, quaternion and transform types
from difftape._src.composite import vec2 as vec2
from difftape._src.composite import vec2f as vec2f
from difftape._src.composite import vec3 as vec3
from difftape._src.composite import vec3f as vec3f
from difftape._src.composite import vec4 as vec4
from difftape._src.composite import vec4f as vec4f
from difftape._src.composite import vec2d as vec2d
from difftape._src.composite import vec3d as vec3d
from difftape._src.composite import vec4d as vec4d
from difftape._src.composite import vec2h as vec2h
from difftape._src.composite import vec3h as vec3h
from difftape._src.composite import vec4h as vec4h
from difftape._src.composite import vec2i as vec2i
from difftape._src.composite import vec3i as vec3i
from difftape._src.composite import vec4i as vec4i
from difftape._src.composite import mat22 as mat22
from difftape._src.composite import mat22f as mat22f
from difftape._src.composite import mat33 as mat33
from difftape._src.composite import mat33f as mat33f
from difftape._src.composite import mat44 as mat44
from difftape._src.composite import mat44f as mat44f
from difftape._src.composite import mat22d as mat22d
from difftape._src.composite import mat33d as mat33d
from difftape._src.composite import mat44d as mat44d
from difftape._src.composite import quat as quat
from difftape._src.composite import quatf as quatf
from difftape._src.composite import quatd as quatd
from difftape._src.composite import quath as quath
from difftape._src.composite import transform as transform
from difftape._src.composite import transformf as transformf
from difftape._src.composite import transformd as transformd
from difftape._src.composite import spatial_vector as spatial_vector
from difftape._src.composite import spatial_vectorf as spatial_vectorf
from difftape._src.composite import spatial_vectord as spatial_vectord
from difftape._src.composite import spatial_matrix as spatial_matrix
from difftape._src.composite import spatial_matrixf as spatial_matrixf
from difftape._src.composite import spatial_matrixd as spatial_matrixd
from difftape._src.composite import vector as vector
from difftape._src.composite import matrix as matrix
from difftape._src.composite import vector as vec
from difftape._src.composite import matrix as mat

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
from difftape._src.device import get_cuda_device as get_cuda_device
from difftape._src.device import get_cuda_device_count as get_cuda_device_count
from difftape._src.device import get_cuda_devices as get_cuda_devices
from difftape._src.device import get_device as get_device
from difftape._src.device import get_devices as get_devices
from difftape._src.device import get_preferred_device as get_preferred_device
from difftape._src.device import init as init
from difftape._src.device import is_cuda_available as is_cuda_available
from difftape._src.device import set_device as set_device
from difftape._src.device import force_load as force_load
from difftape._src.device import load_module as load_module
from difftape._src.device import synchronize as synchronize
from difftape._src.device import synchronize_device as synchronize_device

# category: kernels and launches
from difftape._src.function import Function as Function
from difftape._src.function import adjoint as adjoint
from difftape._src.function import func as func
from difftape._src.function import func_grad as func_grad
from difftape._src.function import func_replay as func_replay
from difftape._src.function import grad as grad
from difftape._src.kernel import Kernel as Kernel
from difftape._src.kernel import get_module_options as get_module_options
from difftape._src.kernel import kernel as kernel
from difftape._src.kernel import set_module_options as set_module_options
from difftape._src.structs import struct as struct
from difftape._src.launch import Launch as Launch
from difftape._src.launch import launch as launch
from difftape._src.language import constant as constant
from difftape._src.language import identity as identity
from difftape._src.language import select as select
from difftape._src.language import printf as printf
from difftape._src.language import static as static
from difftape._src.language import tid as tid
from difftape._src.kernel_library import lower_bound as lower_bound
from difftape._src.kernel_library import poisson as poisson
from difftape._src.kernel_library import sample_cdf as sample_cdf

# category: tape
from difftape._src.tape import Tape as Tape
from difftape._src.timer import ScopedTimer as ScopedTimer

# category: configuration and errors
from difftape._src import config as config
from difftape._src.cache_files import clear_kernel_cache as clear_kernel_cache
from difftape._src.config import LOG_DEBUG as LOG_DEBUG
from difftape._src.config import LOG_ERROR as LOG_ERROR
from difftape._src.config import LOG_INFO as LOG_INFO
from difftape._src.config import LOG_WARNING as LOG_WARNING
from difftape._src.errors import ArrayIndexError as ArrayIndexError
from difftape._src.errors import DiffTapeError as DiffTapeError
from difftape._src.errors import ArrayOverwriteError as ArrayOverwriteError
from difftape._src.errors import ArrayOverwriteWarning as ArrayOverwriteWarning
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

# category: constants (Warp's wp.pi, wp.tau, wp.inf, ...: Python floats)
from difftape._src.constants import E as E
from difftape._src.constants import HALF_PI as HALF_PI
from difftape._src.constants import INF as INF
from difftape._src.constants import LN10 as LN10
from difftape._src.constants import LN2 as LN2
from difftape._src.constants import LOG10E as LOG10E
from difftape._src.constants import LOG2E as LOG2E
from difftape._src.constants import NAN as NAN
from difftape._src.constants import PHI as PHI
from difftape._src.constants import PI as PI
from difftape._src.constants import TAU as TAU
from difftape._src.constants import e as e
from difftape._src.constants import half_pi as half_pi
from difftape._src.constants import inf as inf
from difftape._src.constants import ln10 as ln10
from difftape._src.constants import ln2 as ln2
from difftape._src.constants import log10e as log10e
from difftape._src.constants import log2e as log2e
from difftape._src.constants import nan as nan
from difftape._src.constants import phi as phi
from difftape._src.constants import pi as pi
from difftape._src.constants import tau as tau

# category: Warp's modules (wp.types.vector(...), wp.utils.array_cast(...))
from difftape import types as types
from difftape import utils as utils

# category: interop (PyTorch and DLPack; torch is imported only when a converter is called)
from difftape._src.interop.dlpack import from_dlpack as from_dlpack
from difftape._src.interop.dlpack import to_dlpack as to_dlpack
from difftape._src.interop.torch_bridge import device_from_torch as device_from_torch
from difftape._src.interop.torch_bridge import device_to_torch as device_to_torch
from difftape._src.interop.torch_bridge import dtype_from_torch as dtype_from_torch
from difftape._src.interop.torch_bridge import dtype_to_torch as dtype_to_torch
from difftape._src.interop.torch_bridge import from_torch as from_torch
from difftape._src.interop.torch_bridge import to_torch as to_torch

# category: builtins (every registry record, by its Warp name: sin, min, atomic_add, where, ...)
from difftape._src.ops.public import *  # noqa: E402,F401,F403

_startup.end_import()
del _startup
