"""The kernels ``glm-kv book`` executes notebooks in, and the error every book step raises."""
from __future__ import annotations

import os
import subprocess

# One compute thread per kernel: the runner runs one kernel per core, and the OpenMP threads of
# two kernels spinning on the same two cores cost more than they give.
KERNEL_THREADS = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


class BookError(RuntimeError):
    """A book step failed; the message names profile, notebook and cell."""


def quiet_kernel_manager():
    """A kernel manager whose kernel's own log lines (not the notebook's output) are discarded."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietKernelManager(AsyncKernelManager):
        async def _async_pre_start_kernel(self, **kw):
            cmd, kw = await super()._async_pre_start_kernel(**kw)
            kw.setdefault("stderr", subprocess.DEVNULL)
            kw["env"] = {**(kw.get("env") or os.environ), **KERNEL_THREADS}
            return cmd, kw

    return QuietKernelManager
