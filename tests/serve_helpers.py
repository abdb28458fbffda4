"""A real uvicorn server for the server's tests: in a thread of this process (most tests) or as an
``hmde serve`` process (signals), on a free localhost port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, process: subprocess.Popen | None = None, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}: {process.stdout.read()}")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"no server at {url}")


class ThreadServer:
    """``create_app(served, options)`` under uvicorn in a thread; ``url`` once started."""

    def __init__(self, served, options=None):
        import uvicorn

        from hmde.serve.app import create_app

        self.app = create_app(served, options)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> "ThreadServer":
        self.thread.start()
        wait_until_up(self.url)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def serve_process(args: list[str], env: dict | None = None) -> tuple[subprocess.Popen, str]:
    """``hmde serve ARGS --port P`` as a process; returns it and its URL once it answers /health."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "hmde", "serve", *args, "--port", str(port), "--log-level",
                                "warning"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               env={**os.environ, **(env or {})}, cwd=Path(__file__).parent)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, process)
    except BaseException:
        process.kill()
        raise
    return process, url
