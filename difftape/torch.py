"""PyTorch interop (Warp's ``warp.torch``): zero-copy conversion and a torch autograd adapter.

``import difftape.torch`` works without PyTorch installed; the functions import it when called.
``from_torch``/``to_torch`` and the device/dtype helpers are also available as ``wp.from_torch``….
This module only re-exports.
"""

from difftape._src.interop.dlpack import from_dlpack as from_dlpack
from difftape._src.interop.dlpack import to_dlpack as to_dlpack
from difftape._src.interop.torch_bridge import device_from_torch as device_from_torch
from difftape._src.interop.torch_bridge import device_to_torch as device_to_torch
from difftape._src.interop.torch_bridge import dtype_from_torch as dtype_from_torch
from difftape._src.interop.torch_bridge import dtype_to_torch as dtype_to_torch
from difftape._src.interop.torch_bridge import from_torch as from_torch
from difftape._src.interop.torch_bridge import to_torch as to_torch
from difftape._src.interop.torch_function import tape_function as tape_function

__all__ = ["device_from_torch", "device_to_torch", "dtype_from_torch", "dtype_to_torch",
           "from_dlpack", "from_torch", "tape_function", "to_dlpack", "to_torch"]
