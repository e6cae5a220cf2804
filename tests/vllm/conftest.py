"""vLLM 0.33.0's own KV sizing, driven on the CPU (tests/vllm). pytest runs here in any interpreter;
the launches run in ``.venv-vllm/bin/python`` (scripts/vllm-env.sh makes it). Without that venv every
test here is skipped, with the reason and how to build it.

How the launches run: one fork server per GPU (``oracle.py --serve GPU``, nice'd) imports torch and vLLM
once with the stand-in platform of that GPU; every launch is a fresh fork of it (a launch sees no other
launch's state). After collection every launch the selected tests will ask for is queued in the tests'
order (``launches_of(item)`` in the test module), ``GLM_KV_TEST_JOBS`` at a time (default: the cores, at
most 2); a test waits for its own launches only, which jump the queue when not yet started."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
VENV_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
STUB = ROOT / ".venv-vllm" / "stubcuda" / "libcuda.so.1"
MARKER = "ORACLE-RESULT "
SERVE = "ORACLE-SERVE "
# one launch: a few s of CPU on meta tensors once the server is warm; a hung import must not hang CI
LAUNCH_TIMEOUT_S = int(os.environ.get("GLM_KV_VLLM_TIMEOUT_S", "600"))
JOBS = max(1, int(os.environ.get("GLM_KV_TEST_JOBS", str(min(2, os.cpu_count() or 1)))))

if not (VENV_PYTHON.exists() and STUB.exists()):
    READY, SKIP_REASON = False, (f"vLLM driver: {VENV_PYTHON.relative_to(ROOT)} (with its stub libcuda) is absent; "
                                 "run `make test-vllm` (scripts/vllm-env.sh builds it: several GB, ~4 min)")
else:
    READY, SKIP_REASON = True, ""


def pytest_collection_modifyitems(config, items):
    from tests.pytest_glm_kv import skip_folder_unless

    skip_folder_unless(READY, SKIP_REASON, HERE, items)


def oracle_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "VIRTUAL_ENV"))}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    return env


def run_fresh(launch: dict) -> dict:
    """One launch in a new process of its own (``oracle.py '<json>'``), not through a server."""
    key = json.dumps(launch, sort_keys=True)
    proc = subprocess.run(["nice", "-n", "10", str(VENV_PYTHON), str(HERE / "oracle.py"), key],
                          capture_output=True, text=True, cwd=ROOT, env=oracle_env(), timeout=LAUNCH_TIMEOUT_S)
    return _result(key, proc.returncode, proc.stdout, proc.stderr)


def _result(key: str, rc: int | None, out: str, err: str) -> dict:
    lines = [ln for ln in out.splitlines() if ln.startswith(MARKER)]
    assert rc == 0 and len(lines) == 1, f"oracle failed for {key} (rc {rc}):\n{out[-3000:]}\n{err[-6000:]}"
    return json.loads(lines[0][len(MARKER):])


class _Launch:
    def __init__(self, ident: str, key: str):
        self.ident, self.key, self.gpu = ident, key, json.loads(key).get("gpu")
        self.done = threading.Event()
        self.pid: int | None = None
        self.rc: int | None = None
        self.queued, self.started, self.finished = time.monotonic(), None, None


class Oracle:
    """The session's launches: one fork server per GPU, JOBS launches at a time, each result kept."""

    def __init__(self, jobs: int = JOBS):
        self.jobs = jobs
        self.folder = Path(tempfile.mkdtemp(prefix="glm-kv-vllm-"))
        self.lock = threading.Lock()
        self.launches: dict[str, _Launch] = {}
        self.queue: list[_Launch] = []
        self.running = 0
        self.servers: dict[str, tuple[subprocess.Popen, threading.Thread, object]] = {}
        self.results: dict[str, dict] = {}

    # --- the queue ---
    def want(self, launch: dict, first: bool = False) -> _Launch:
        key = json.dumps(launch, sort_keys=True)
        with self.lock:
            entry = self.launches.get(key)
            if entry is None:
                entry = self.launches[key] = _Launch(f"L{len(self.launches)}", key)
                self.queue.append(entry)
            if first and entry in self.queue:
                self.queue.remove(entry)
                self.queue.insert(0, entry)
            self._pump()
        return entry

    def _pump(self) -> None:   # under self.lock
        while self.running < self.jobs and self.queue:
            entry = self.queue.pop(0)
            self.running += 1
            entry.started = time.monotonic()
            try:
                proc = self._server(entry.gpu)
                proc.stdin.write(f"{entry.ident} {self.folder} {entry.key}\n")
                proc.stdin.flush()
            except (OSError, ValueError) as e:   # the server is gone: the launch fails with its log
                self._finish(entry, f"server for {entry.gpu} unavailable: {e}")

    def _server(self, gpu: str) -> subprocess.Popen:
        if gpu not in self.servers:
            log = open(self.folder / f"server-{gpu}.log", "w")  # noqa: SIM115 - closed in close()
            proc = subprocess.Popen(["nice", "-n", "10", str(VENV_PYTHON), str(HERE / "oracle.py"), "--serve", str(gpu)],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                                    cwd=ROOT, env=oracle_env(), bufsize=1)
            reader = threading.Thread(target=self._read, args=(gpu, proc), daemon=True)
            self.servers[gpu] = (proc, reader, log)
            reader.start()
        return self.servers[gpu][0]

    def _read(self, gpu: str, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            if not line.startswith(SERVE):
                continue
            word, *rest = line[len(SERVE):].split()
            with self.lock:
                entry = next((e for e in self.launches.values() if rest and e.ident == rest[0]), None)
                if word == "started" and entry:
                    entry.pid = int(rest[1])
                elif word == "done" and entry:
                    entry.rc = int(rest[1])
                    self._finish(entry)
        with self.lock:   # the server exited: every launch it still owed fails
            for entry in self.launches.values():
                if entry.gpu == gpu and entry.started and not entry.done.is_set():
                    self._finish(entry, f"server for {gpu} exited (rc {proc.poll()})")

    def _finish(self, entry: _Launch, why: str = "") -> None:   # under self.lock
        if entry.done.is_set():
            return
        entry.finished = time.monotonic()
        entry.why = why
        self.running -= 1
        entry.done.set()
        self._pump()

    # --- what the tests call ---
    def plan(self, launch: dict) -> dict:
        entry = self.want(launch, first=True)
        while not entry.done.wait(1.0):
            if entry.started and time.monotonic() - entry.started > LAUNCH_TIMEOUT_S:
                if entry.pid:
                    os.kill(entry.pid, 9)
                entry.done.wait(30)
                break
        if entry.key not in self.results:
            base = self.folder / entry.ident
            out = base.with_suffix(".out").read_text() if base.with_suffix(".out").exists() else ""
            err = base.with_suffix(".err").read_text() if base.with_suffix(".err").exists() else ""
            if getattr(entry, "why", ""):
                log = self.folder / f"server-{entry.gpu}.log"
                err += f"\n{entry.why}\nserver log:\n" + (log.read_text()[-6000:] if log.exists() else "")
            self.results[entry.key] = _result(entry.key, entry.rc, out, err)
        return self.results[entry.key]

    def close(self) -> None:
        for proc, reader, log in self.servers.values():
            try:
                proc.stdin.close()
                proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
            reader.join(timeout=10)
            proc.stdout.close()
            log.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def timings(self) -> list[tuple[str, float]]:
        return [(e.key, e.finished - e.started) for e in self.launches.values() if e.finished and e.started]


@pytest.fixture(scope="session")
def vllm_oracle(request):
    oracle = Oracle()
    # every launch the selected tests will ask for, in the order they run (the test module says which)
    for item in request.session.items:
        launches_of = getattr(item.module, "launches_of", None)
        if launches_of is not None and item.get_closest_marker("skip") is None:
            for launch in launches_of(item):
                oracle.want(launch)
    yield oracle
    oracle.close()


@pytest.fixture(scope="session")
def vllm_plan(vllm_oracle):
    return vllm_oracle.plan
