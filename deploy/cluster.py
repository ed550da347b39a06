"""Scale-out on one machine: PostgreSQL, N `streamlit run app.py` replicas and nginx in front, all on loopback.

    python -m deploy.cluster up [--replicas 2] [--port 8080] [--database-url URL] [--run-dir DIR]
    python -m deploy.cluster stop RUN_DIR

`up` starts everything, prints the address and waits; Ctrl-C (or SIGTERM, or `stop RUN_DIR` from another
shell) stops everything it started. Without --database-url it starts a throwaway PostgreSQL cluster
(scripts/start_test_postgres.sh, trust authentication on 127.0.0.1: for trying the recipe, never for real
data) and deletes it on stop. Every replica gets the same DATABASE_URL and the same cookie secret, and the
flags of deploy/streamlit-production.toml. nginx runs from deploy/nginx.conf with the replicas filled in.

The tests and bench/bench_cluster.py use `Cluster` directly:

    with Cluster(replicas=2) as cluster:
        cluster.url                       # http://127.0.0.1:<port>, nginx
        cluster.replica_urls[0]           # one replica, directly
        cluster.kill_replica(0)           # SIGKILL, as a crash would
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = Path(__file__).resolve().parent
PRODUCTION_TOML = DEPLOY / "streamlit-production.toml"
NGINX_TEMPLATE = DEPLOY / "nginx.conf"
POSTGRES_SCRIPT = ROOT / "scripts" / "start_test_postgres.sh"
ROUTE_COOKIE = "abh_route"
START_LIMIT_S = 90.0
STOP_LIMIT_S = 15.0


class ClusterError(RuntimeError):
    """Something the cluster needs is missing or did not start; the message says what."""


# ---------------------------------------------------------------- pieces


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def nginx_binary() -> str | None:
    """Debian's nginx (root's PATH has /usr/sbin, a user's may not)."""
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx")
                                          if os.access(p, os.X_OK)), None)


def production_flags(path: Path = PRODUCTION_TOML) -> list[str]:
    """deploy/streamlit-production.toml as `streamlit run` flags: --section.option value."""
    flags = []
    for section, options in tomllib.loads(path.read_text()).items():
        for option, value in options.items():
            if isinstance(value, dict | list):
                raise ClusterError(f"{path.name}: {section}.{option} is not a scalar (only scalars become flags)")
            text = str(value).lower() if isinstance(value, bool) else str(value)
            flags += [f"--{section}.{option}", text]
    return flags


def nginx_config(run_dir: Path, listen: str, replica_ports: list[int], template: Path = NGINX_TEMPLATE) -> str:
    """deploy/nginx.conf with the run directory, the listen address and the replicas filled in."""
    servers = "\n".join(f"        server 127.0.0.1:{port} max_fails=1 fail_timeout=10s;" for port in replica_ports)
    text = template.read_text()
    for name, value in (("RUN_DIR", str(run_dir)), ("LISTEN", listen), ("UPSTREAM_SERVERS", servers)):
        text = text.replace(f"@{name}@", value)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise ClusterError(f"nginx template: unfilled placeholders {sorted(set(left))}")
    return text


def healthy(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url + "/_stcore/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def rss_mb(pid: int) -> float:
    """Resident memory of one process (VmRSS), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def start_throwaway_postgres(port: int) -> str:
    """A throwaway PostgreSQL cluster on 127.0.0.1:`port` (scripts/start_test_postgres.sh); its URL."""
    if not POSTGRES_SCRIPT.is_file():
        raise ClusterError(f"missing {POSTGRES_SCRIPT}")
    proc = subprocess.run(["bash", str(POSTGRES_SCRIPT), "start"], env=_postgres_env(port), capture_output=True,
                          text=True, timeout=START_LIMIT_S)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise ClusterError(f"PostgreSQL did not start (Debian's postgresql package?):\n{proc.stderr[-2000:]}")
    return lines[-1]


def stop_throwaway_postgres(port: int) -> None:
    """Stop the cluster of start_throwaway_postgres(port) and delete its files."""
    subprocess.run(["bash", str(POSTGRES_SCRIPT), "stop"], env=_postgres_env(port), capture_output=True, timeout=60)


def _postgres_env(port: int) -> dict[str, str]:
    return {**os.environ, "TEST_PG_PORT": str(port), "TEST_PG_DB": "attention",
            "TMPDIR": os.environ.get("TMPDIR", "/tmp")}


def _stop_process(process: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout=STOP_LIMIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


LOG_FIELD = re.compile(r'(\w+)=("[^"]*"|\S+)')


def parse_access_line(line: str) -> dict[str, str]:
    """One line of the `routed` access log as {field: value} (status, method, route, upstream, uri, …)."""
    return {key: value.strip('"') for key, value in LOG_FIELD.findall(line)}


# ---------------------------------------------------------------- the cluster


@dataclass
class Cluster:
    replicas: int = 2
    port: int = 0  # nginx's port; 0: a free one
    database_url: str | None = None  # None: a throwaway PostgreSQL cluster
    run_dir: Path | None = None  # logs, nginx.conf, cluster.json; None: a new temporary folder
    env: dict[str, str] = field(default_factory=dict)  # extra environment for the replicas

    url: str = ""
    replica_ports: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen] = field(default_factory=list)
    nginx: subprocess.Popen | None = None
    _pg_port: int | None = None
    _own_run_dir: bool = False

    # -------------------------------------------------- start

    def start(self) -> Cluster:
        if self.replicas < 1 or self.replicas > 16:
            raise ClusterError("between 1 and 16 replicas")
        nginx = nginx_binary()
        if nginx is None:
            raise ClusterError("no nginx: install Debian's nginx package (apt-get install nginx)")
        if self.run_dir is None:
            self.run_dir, self._own_run_dir = Path(tempfile.mkdtemp(prefix="attention-cluster-")), True
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.run_dir.chmod(0o755)  # nginx's workers (user nobody when started as root) write tmp/ here
        try:
            if self.database_url is None:
                self.database_url = self._start_postgres()
            self._check_database()
            self._start_replicas()
            self._start_nginx(nginx)
            self._write_state()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_postgres(self) -> str:
        port = free_port()
        url = start_throwaway_postgres(port)
        self._pg_port = port
        return url

    def _check_database(self) -> None:
        """Create the tables once, before the replicas race to, and fail here if the database is unreachable."""
        if str(ROOT) not in sys.path:
            sys.path.insert(0, str(ROOT))
        import sqlalchemy as sa

        import storage
        try:
            storage.open_engine(self.database_url).dispose()
        except sa.exc.SQLAlchemyError as err:
            raise ClusterError(f"database {self.database_url} unreachable: {type(err).__name__}") from None

    def replica_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "ATTENTION_DB_PATH"}
        env.update(DATABASE_URL=self.database_url or "", PYTHONPATH=str(ROOT),
                   STREAMLIT_SERVER_COOKIE_SECRET=env.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(32))
        env.update(self.env)
        return env

    def _start_replicas(self) -> None:
        env, flags = self.replica_env(), production_flags()  # one cookie secret for all replicas
        for index in range(self.replicas):
            port = free_port()
            command = [sys.executable, "-m", "streamlit", "run", "app.py", *flags, "--server.port", str(port)]
            with (self.run_dir / f"replica-{index}.log").open("wb") as log:
                self.processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log,
                                                       stderr=subprocess.STDOUT))
            self.replica_ports.append(port)
        deadline = time.monotonic() + START_LIMIT_S
        waiting = set(range(self.replicas))
        while waiting and time.monotonic() < deadline:
            for index in sorted(waiting):
                if self.processes[index].poll() is not None:
                    raise ClusterError(f"replica {index} exited:\n{self.replica_log(index)[-3000:]}")
                if healthy(self.replica_urls[index]):
                    waiting.discard(index)
            time.sleep(0.1)  # polling interval of the health checks
        if waiting:
            raise ClusterError(f"replicas {sorted(waiting)} not healthy in {START_LIMIT_S:.0f} s")

    def _start_nginx(self, nginx: str) -> None:
        self.port = self.port or free_port()
        (self.run_dir / "tmp").mkdir(exist_ok=True)
        config = self.run_dir / "nginx.conf"
        config.write_text(nginx_config(self.run_dir, f"127.0.0.1:{self.port}", self.replica_ports))
        base = [nginx, "-p", str(self.run_dir), "-c", str(config), "-e", str(self.run_dir / "nginx-error.log")]
        check = subprocess.run([*base, "-t", "-q"], capture_output=True, text=True, timeout=30)
        if check.returncode != 0:
            raise ClusterError(f"nginx -t failed:\n{check.stderr[-2000:]}")
        with (self.run_dir / "nginx.out").open("wb") as out:
            self.nginx = subprocess.Popen([*base, "-g", "daemon off;"], stdout=out, stderr=subprocess.STDOUT)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while not healthy(self.url):
            if self.nginx.poll() is not None or time.monotonic() > deadline:
                raise ClusterError(f"nginx did not start:\n{self.nginx_log()[-2000:]}")
            time.sleep(0.05)

    def _write_state(self) -> None:
        state = {"url": self.url, "owner_pid": os.getpid(), "nginx_pid": self.nginx.pid,
                 "replica_pids": [p.pid for p in self.processes], "replica_ports": self.replica_ports,
                 "pg_port": self._pg_port}
        (self.run_dir / "cluster.json").write_text(json.dumps(state, indent=1))

    # -------------------------------------------------- use

    @property
    def replica_urls(self) -> list[str]:
        return [f"http://127.0.0.1:{port}" for port in self.replica_ports]

    def replica_of(self, upstream: str) -> int | None:
        """The index of the replica behind an access-log upstream field (the last one nginx tried)."""
        last = upstream.split(",")[-1].strip()
        for index, port in enumerate(self.replica_ports):
            if last == f"127.0.0.1:{port}":
                return index
        return None

    def kill_replica(self, index: int, sig: int = signal.SIGKILL) -> None:
        """Stop one replica at once (SIGKILL: no cleanup, as a crash or an OOM kill)."""
        process = self.processes[index]
        process.send_signal(sig)
        process.wait(timeout=STOP_LIMIT_S)

    def replica_log(self, index: int) -> str:
        path = self.run_dir / f"replica-{index}.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def nginx_log(self) -> str:
        path = self.run_dir / "nginx-error.log"
        return path.read_text(errors="replace") if path.is_file() else ""

    def access_log(self) -> list[dict[str, str]]:
        path = self.run_dir / "nginx-access.log"
        lines = path.read_text(errors="replace").splitlines() if path.is_file() else []
        return [parse_access_line(line) for line in lines]

    def rss_mb(self) -> list[float]:
        """Resident memory of each replica process, MB (0 for a dead one)."""
        return [rss_mb(p.pid) if p.poll() is None else 0.0 for p in self.processes]

    # -------------------------------------------------- stop

    def stop(self) -> None:
        if self.nginx is not None and self.nginx.poll() is None:
            self.nginx.send_signal(signal.SIGQUIT)  # graceful: lets open responses finish
        for process in self.processes:  # all at once, then wait for each
            if process.poll() is None:
                process.terminate()
        for process in [*self.processes, *([self.nginx] if self.nginx else [])]:
            _stop_process(process)
        if self._pg_port is not None:
            stop_throwaway_postgres(self._pg_port)
            self._pg_port = None
        if self._own_run_dir and self.run_dir is not None and not os.environ.get("ATTENTION_KEEP_CLUSTER_LOGS"):
            shutil.rmtree(self.run_dir, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()


# ---------------------------------------------------------------- command line


def _runs(pid: int, *words: str) -> bool:
    """The process `pid` still runs a command with one of these words (not a recycled pid of something else)."""
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return False
    return any(word in command for word in words)


def stop_from_state(run_dir: Path) -> None:
    """Stop a cluster that `up --run-dir RUN_DIR` started in another shell: ask its `up` to stop it all,
    or, when that process is gone, stop what it left behind."""
    state = json.loads((run_dir / "cluster.json").read_text())
    owner = state.get("owner_pid")
    if owner and owner != os.getpid() and _runs(owner, "deploy.cluster"):
        os.kill(owner, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while _runs(owner, "deploy.cluster") and time.monotonic() < deadline:
            time.sleep(0.2)  # waiting for `up` to stop its processes
        print(f"stopped the cluster of {run_dir}")
        return
    for pid in [state["nginx_pid"], *state["replica_pids"]]:
        if _runs(pid, "nginx", "streamlit"):
            os.kill(pid, signal.SIGTERM)
    if state.get("pg_port"):
        stop_throwaway_postgres(state["pg_port"])
    print(f"stopped the cluster of {run_dir}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.cluster", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start PostgreSQL, the replicas and nginx; stop them on Ctrl-C")
    up.add_argument("--replicas", type=int, default=2)
    up.add_argument("--port", type=int, default=8080, help="nginx's port on 127.0.0.1 (0: a free one)")
    up.add_argument("--database-url", default=os.environ.get("DATABASE_URL") or None,
                    help="an existing PostgreSQL (default: $DATABASE_URL, else a throwaway cluster)")
    up.add_argument("--run-dir", type=Path, help="logs, nginx.conf and cluster.json (default: a temporary folder)")
    stop = commands.add_parser("stop", help="stop a cluster started with `up --run-dir RUN_DIR`")
    stop.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)

    if args.command == "stop":
        stop_from_state(args.run_dir)
        return 0
    cluster = Cluster(replicas=args.replicas, port=args.port, database_url=args.database_url, run_dir=args.run_dir)
    stopping = False

    def on_signal(_signum, _frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
    except ClusterError as err:
        print(f"cluster: {err}", file=sys.stderr)
        return 1
    try:
        print(f"{cluster.replicas} replicas behind nginx, one PostgreSQL; logs in {cluster.run_dir}")
        print(f"stop: Ctrl-C here, or python -m deploy.cluster stop {cluster.run_dir}")
        print(cluster.url, flush=True)
        while not stopping:
            if cluster.nginx.poll() is not None:
                print("nginx exited; stopping", file=sys.stderr)
                break
            if all(p.poll() is not None for p in cluster.processes):
                print("every replica exited; stopping", file=sys.stderr)
                break
            time.sleep(0.5)  # waiting for a signal
    finally:
        cluster.stop()
        print("stopped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
