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
    """A kernel manager whose kernel's own log lines (not the notebook's output) are discarded, and
    which hands every notebook executed in its kernel the same client (``close_client`` ends it).

    nbclient asks the manager for a new client per notebook and waits until it is ready, and
    jupyter_client's ``wait_for_ready`` ends by draining IOPub until 0.2 s pass with no message:
    at least 0.2 s idle per notebook, longer when the new IOPub socket misses the kernel_info
    status (ZMQ's slow joiner) and it starts over. One client per kernel is ready once. Sharing it
    is safe because nbclient takes only the replies and outputs whose parent is its own request.
    """
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.manager import AsyncKernelManager

    class OneClient(AsyncKernelClient):
        _started = False
        _ready = False

        def start_channels(self, *args, **kw) -> None:
            if not self._started:   # the heartbeat channel is a thread: it can start only once
                super().start_channels(*args, **kw)
                self._started = True

        async def wait_for_ready(self, timeout=None) -> None:
            if not self._ready:
                await super().wait_for_ready(timeout=timeout)
                self._ready = True

    class QuietKernelManager(AsyncKernelManager):
        _one_client = None

        async def _async_pre_start_kernel(self, **kw):
            cmd, kw = await super()._async_pre_start_kernel(**kw)
            kw.setdefault("stderr", subprocess.DEVNULL)
            kw["env"] = {**(kw.get("env") or os.environ), **KERNEL_THREADS}
            return cmd, kw

        def client(self, **kw):
            if self._one_client is None:
                self.client_factory = OneClient
                self._one_client = super().client(**kw)
            return self._one_client

        def close_client(self) -> None:
            """Stop the shared client's channels (their ZMQ sockets); the next ``client`` is new."""
            kc, self._one_client = self._one_client, None
            if kc is not None:
                kc.stop_channels()

    return QuietKernelManager
