"""A throw-away redis-server for tests and benchmarks: 127.0.0.1, a free
port, no persistence; stopped by its own process id."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """``redis-server`` on 127.0.0.1 at ``port`` (a free one by default)."""

    def __init__(self, port: int | None = None, logfile: str | None = None):
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not installed (scripts/test-celery installs it with apt-get)")
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}"
        self._log = open(logfile or os.devnull, "ab")
        self.proc = subprocess.Popen(
            [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def kill(self) -> None:
        """Stop it at once (SIGKILL, by its pid), as a crash would."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    @staticmethod
    def version() -> str:
        """``redis-server --version``, first line."""
        exe = shutil.which("redis-server")
        if exe is None:
            return "not installed"
        return subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
