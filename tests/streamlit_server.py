"""Start, wait for and stop a real `streamlit run` on loopback: shared by the browser tests and bench/."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SERVER_START_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(port: int, log: Path, env: dict[str, str], script: str = "app.py",
                 flags: tuple[str, ...] = ()) -> subprocess.Popen:
    """`streamlit run <script>` on 127.0.0.1:<port>, its output in `log` (not yet waited for)."""
    command = [sys.executable, "-m", "streamlit", "run", script, "--server.headless", "true",
               "--server.port", str(port), "--server.address", "127.0.0.1",
               "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false", *flags]
    with log.open("wb") as out:
        return subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_healthy(url: str, process: subprocess.Popen, log: Path, limit_s: float = SERVER_START_S) -> None:
    """Poll Streamlit's health endpoint until it answers (the server is up and the app loaded)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"streamlit exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.1)  # polling interval of the health check, not a wait on the page
    process.kill()
    raise RuntimeError(f"streamlit did not become healthy in {limit_s} s:\n{log.read_text()[-3000:]}")


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)
