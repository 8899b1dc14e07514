"""Records the numba.cuda kernels a CUDA-simulator run launches, with their argument types.

Put on ``PYTHONPATH`` with ``HPC_RECORD_KERNELS=DIR`` and ``NUMBA_ENABLE_CUDASIM=1``: every
kernel launch appends ``(source file, module, qualified name, argument types)`` to a pickle in
DIR, written when the process exits. ``scripts/ptx_check.py`` then compiles each recorded
kernel for a real GPU (PTX for sm_90, assembled by ptxas) with those types: the simulator
checks what a kernel computes, this checks that it compiles, and what it costs in registers.
"""

from __future__ import annotations

import os


def _install(directory: str) -> None:
    import atexit
    import inspect
    import pickle

    import numba
    from numba.cuda.simulator import kernel as sim

    seen: set[tuple] = set()
    original = sim.FakeCUDAKernel.__call__

    def argument_type(value):
        array = getattr(value, "_ary", None)  # a simulated device array
        return numba.typeof(array if array is not None else value)

    def recording_call(self, *args):
        if not (self._device or sim._kernel_context):
            fn = self.fn
            try:
                key = (
                    inspect.getfile(fn),
                    fn.__module__,
                    fn.__qualname__,
                    tuple(argument_type(a) for a in args),
                    bool(self._fastmath),
                )
                seen.add(key)
            except Exception:  # noqa: BLE001 (a type numba cannot name: the kernel is still run)
                pass
        return original(self, *args)

    sim.FakeCUDAKernel.__call__ = recording_call

    def dump() -> None:
        if seen:
            path = os.path.join(directory, f"kernels-{os.getpid()}.pkl")
            with open(path, "wb") as fh:
                pickle.dump(sorted(seen, key=repr), fh)

    atexit.register(dump)


_DIR = os.environ.get("HPC_RECORD_KERNELS")
if _DIR and os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    _install(_DIR)
