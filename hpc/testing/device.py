"""A strict stand-in for CuPy on the host: GPU code paths tested without a GPU.

Under the CUDA simulator the GPU kernels run on the host, and NumPy arrays usually stand in
for device arrays. Code that mixes host and device arrays then passes every test and fails
on the first real GPU: CuPy refuses a NumPy array as an operand, refuses to turn a device
array into a NumPy one implicitly (``np.asarray``, a numba CPU kernel taking it), and has no
object arrays. Here :class:`DeviceArray` wraps a NumPy array and refuses the same things;
:data:`xp` is a module with CuPy's functions (NumPy's, on device arrays), and
:func:`simulated_backend` is the GPU backend made of the two, whose numba.cuda kernels
(simulated) receive the wrapped arrays.

What a :class:`DeviceArray` allows and refuses, as CuPy does
--------------------------------------------------------------
- operations and NumPy functions on device arrays, Python scalars and NumPy scalars: a
  device array (reductions give 0-d device arrays, as CuPy's do);
- a NumPy array (not 0-d) as an operand or function argument: ``TypeError``;
- ``np.asarray(a)``, ``np.array(a)``, numba CPU kernels, ``memoryview``: ``TypeError``; the
  explicit copies are ``a.get()`` and ``xp.asnumpy(a)``;
- ``xp.asarray(host)`` / ``xp.array(host)``: copies to the "device";
- indexing with device or host index arrays; assigning host values into a device array
  (both copy as CuPy does);
- object dtype: ``TypeError`` (strings stay on the host, as dictionaries);
- ``int(a)``, ``float(a)``, ``bool(a)`` of one element (a synchronising copy).

Examples
--------
>>> import numpy as np
>>> from hpc.testing.device import xp
>>> a = xp.arange(4)
>>> int((a * 2).sum())
12
>>> a + np.ones(4)
Traceback (most recent call last):
...
TypeError: a host (NumPy) array as an operand of a device array operation
"""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import numpy.lib.mixins

__all__ = ["DeviceArray", "xp", "simulated_backend", "is_strict_device_array"]

# NumPy functions CuPy does not provide (used on device arrays they must fail here too)
_NOT_IN_CUPY = frozenset({
    "apply_along_axis", "apply_over_axes", "piecewise", "vectorize", "frompyfunc",
    "unique_all", "nanmedian_object", "char", "rec", "ma",
})


class DeviceArray(numpy.lib.mixins.NDArrayOperatorsMixin):
    """A NumPy array standing for a CuPy array (see the module's notes)."""

    __slots__ = ("_a",)
    __array_priority__ = 1000

    def __init__(self, a: np.ndarray) -> None:
        if not isinstance(a, np.ndarray):
            a = np.asarray(a)
        if a.dtype.kind in "OUS":
            raise TypeError(f"{a.dtype} arrays have no device form (CuPy has no object or "
                            "string dtypes)")
        self._a = a

    # -- the boundary -----------------------------------------------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError("Implicit conversion to a NumPy array is not allowed: use .get() or "
                        "xp.asnumpy() for an explicit device-to-host copy")

    def get(self) -> np.ndarray:
        """The values as a NumPy array (a device-to-host copy)."""
        return self._a.copy()

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        interface = dict(self._a.__array_interface__)
        interface["version"] = 3
        return interface

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        args = [_device_operand(x) for x in inputs]
        given = kwargs.get("out")
        if given is not None:
            kwargs["out"] = tuple(_device_operand(o) for o in given)
        result = getattr(ufunc, method)(*args, **kwargs)
        if given is not None:  # the results are the given device arrays
            return given[0] if len(given) == 1 else given
        return _wrap(result)

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        if func.__name__ in _NOT_IN_CUPY:
            raise TypeError(f"numpy.{func.__name__} has no CuPy counterpart")
        return _wrap(func(*_device_operand(args), **_device_operand(kwargs)))

    # -- the array's own interface --------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: DeviceArray(self._a.T))

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        return (_wrap(v) for v in self._a)

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        self._a[_index(key)] = value._a if isinstance(value, DeviceArray) else value

    def __int__(self) -> int:
        return int(self._a)

    def __float__(self) -> float:
        return float(self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __index__(self) -> int:
        return self._a.__index__()

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"

    def __getattr__(self, name: str) -> Any:
        # ndarray methods (astype, sum, view, ...): on the wrapped array, results wrapped
        if name.startswith("__") or name in ("tofile", "tobytes", "ctypes", "data", "base"):
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*args: Any, **kwargs: Any) -> Any:
            return _wrap(attr(*_device_operand(args), **_device_operand(kwargs)))

        return method


def is_strict_device_array(a: Any) -> bool:
    """Whether ``a`` is a :class:`DeviceArray`."""
    return isinstance(a, DeviceArray)


def _wrap(x: Any) -> Any:
    """Results as device values: arrays and NumPy scalars become device arrays."""
    if isinstance(x, np.ndarray):
        return DeviceArray(x)
    if isinstance(x, np.generic) and not isinstance(x, np.object_):
        return DeviceArray(np.asarray(x))
    if isinstance(x, tuple):
        return tuple(_wrap(v) for v in x)
    if isinstance(x, list):
        return [_wrap(v) for v in x]
    return x


def _device_operand(x: Any) -> Any:
    """An operand unwrapped for NumPy; a host array (not 0-d) is refused as CuPy does."""
    if isinstance(x, DeviceArray):
        return x._a
    if isinstance(x, np.ndarray) and x.ndim > 0:
        raise TypeError("a host (NumPy) array as an operand of a device array operation")
    if isinstance(x, tuple):
        return tuple(_device_operand(v) for v in x)
    if isinstance(x, list):
        return [_device_operand(v) for v in x]
    if isinstance(x, dict):
        return {k: _device_operand(v) for k, v in x.items()}
    return x


def _index(key: Any) -> Any:
    """An index: device arrays unwrapped; host index arrays allowed (copied, as CuPy)."""
    if isinstance(key, DeviceArray):
        return key._a
    if isinstance(key, tuple):
        return tuple(_index(k) for k in key)
    return key


# -- the module ---------------------------------------------------------------------------------
def _host_in(x: Any) -> Any:
    """``asarray``'s input: host data allowed (the copy to the device), device unwrapped."""
    if isinstance(x, DeviceArray):
        return x._a
    if isinstance(x, list | tuple):
        return type(x)(_host_in(v) for v in x)
    return x


class _Module(types.ModuleType):
    """CuPy's namespace: NumPy's functions taking and giving device arrays."""

    def __getattr__(self, name: str) -> Any:
        if name in _NOT_IN_CUPY:
            raise AttributeError(f"CuPy has no {name}")
        attr = getattr(np, name)
        if isinstance(attr, type | np.ufunc) or not callable(attr):
            return attr  # dtypes, constants; ufuncs dispatch through DeviceArray

        def function(*args: Any, **kwargs: Any) -> Any:
            return _wrap(attr(*_device_operand(args), **_device_operand(kwargs)))

        function.__name__ = name
        return function


xp = _Module("hpc.testing.device.xp")


def _asarray(a: Any, dtype: Any = None, copy: bool | None = None, **kwargs: Any
             ) -> DeviceArray:
    if isinstance(a, DeviceArray) and not copy and (dtype is None or
                                                   np.dtype(dtype) == a.dtype):
        return a
    return DeviceArray(np.array(_host_in(a), dtype=dtype, copy=True, **kwargs))


def _asnumpy(a: Any) -> np.ndarray:
    return a.get() if isinstance(a, DeviceArray) else np.asarray(a)


xp.asarray = _asarray  # type: ignore[attr-defined]
xp.array = _asarray  # type: ignore[attr-defined]
xp.asnumpy = _asnumpy  # type: ignore[attr-defined]
xp.ndarray = DeviceArray  # type: ignore[attr-defined]
# the calls the backend makes on CuPy's device object (one stream: nothing to wait for)
_waits = types.SimpleNamespace(synchronize=lambda: None, use=lambda: None)
xp.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
    Device=lambda *a: _waits, get_current_stream=lambda: _waits)
DeviceArray.array_module = xp  # hpc.backend.array_module's answer for these arrays


def simulated_backend() -> Any:
    """The GPU backend on :data:`xp`, for a process running under the CUDA simulator
    (``NUMBA_ENABLE_CUDASIM=1``): numba.cuda kernels launched on it receive the wrapped
    NumPy arrays (the simulator indexes them on the host)."""
    from hpc.backend import Backend

    _unwrap_kernel_arguments()
    return Backend("gpu", xp)


_patched = False


def _unwrap_kernel_arguments() -> None:
    """Make the simulator's kernels take :class:`DeviceArray` arguments as the arrays they
    wrap (a real kernel reads a CuPy array through ``__cuda_array_interface__``)."""
    global _patched
    if _patched:
        return
    from numba.cuda.simulator import kernel as sim

    launch = sim.FakeCUDAKernel.__call__

    def call(self: Any, *args: Any) -> Any:
        return launch(self, *[a._a if isinstance(a, DeviceArray) else a for a in args])

    sim.FakeCUDAKernel.__call__ = call
    _patched = True
