"""The production stack on one machine's loopback: app servers (gunicorn or granian, as shipped in
``deploy/``) and Caddy balancing over them, started and stopped as context managers.

The tests and ``bench/ingest.py`` run the shipped configuration through these (a dress rehearsal
of ``docs/deploy.md`` without a domain: Caddy serves plain HTTP on a loopback port)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, Self

import httpx

LOOPBACK = "127.0.0.1"
DEPLOY_DIR = Path(__file__).resolve().parent
CADDYFILE = DEPLOY_DIR / "Caddyfile"

Server = Literal["gunicorn", "granian"]
SERVERS: tuple[Server, ...] = ("gunicorn", "granian")
DEFAULT_SERVER: Server = "granian"
"""The WSGI server the shipped units and image run: granian measured faster than gunicorn here
(docs/deploy.md, Performance); gunicorn stays the alternative (deploy/gunicorn_conf.py)."""


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def read_env_file(path: Path) -> dict[str, str]:
    """``KEY=VALUE`` lines of an environment file (systemd's EnvironmentFile, compose's env_file)."""
    pairs = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            pairs[key.strip()] = value.strip()
    return pairs


def app_command(server: Server, port: int, workers: int, threads: int) -> tuple[list[str], dict[str, str]]:
    """The command line (and extra environment) that serves the app with ``server`` on ``port``.

    gunicorn reads ``deploy/gunicorn_conf.py``, granian the variables of ``deploy/granian.env``
    (the shipped files), with the address and sizes given here."""
    if server == "gunicorn":
        env = {"HUMANLIKE_BIND": f"{LOOPBACK}:{port}", "HUMANLIKE_WORKERS": str(workers),
               "HUMANLIKE_THREADS": str(threads)}
        return [sys.executable, "-m", "gunicorn", "-c", "python:humanlike.deploy.gunicorn_conf"], env
    if server == "granian":
        env = read_env_file(DEPLOY_DIR / "granian.env")
        env.update(GRANIAN_HOST=LOOPBACK, GRANIAN_WORKERS=str(workers),
                   GRANIAN_BLOCKING_THREADS=str(threads))
        return [sys.executable, "-m", "granian", "--port", str(port), "humanlike.server:create_app"], env
    raise ValueError(f"server must be one of {SERVERS}, not {server!r}")


def _start(args: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start ``args`` with its stderr in an unlinked temporary file (never a pipe nobody reads)."""
    log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the process; closed on exit)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=log)
    proc.log = log  # type: ignore[attr-defined]
    return proc


def log_tail(proc: subprocess.Popen, n: int = 3000) -> str:
    """The last ``n`` characters the process wrote to stderr."""
    log = proc.log  # type: ignore[attr-defined]
    log.seek(0)
    return str(log.read().decode(errors="replace")[-n:])


def _wait_healthy(url: str, proc: subprocess.Popen, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited ({proc.returncode}): {log_tail(proc)}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not answer {url}/healthz within {timeout_s:.0f} s")


def _stop(proc: subprocess.Popen | None, timeout_s: float = 10) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc is not None and hasattr(proc, "log"):
        proc.log.close()


class _Process:
    """A child process that serves ``/healthz`` at ``url`` once ready (``args``, ``env``, ``name``
    set by the subclass); as a context manager it starts, waits and stops it."""

    args: list[str]
    env: dict[str, str]
    url: str
    name: str
    proc: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the process (``ready`` waits for it to answer)."""
        self.proc = _start(self.args, self.env)

    def ready(self) -> None:
        """Wait until ``/healthz`` answers 200 (RuntimeError with the log if it exits first)."""
        assert self.proc is not None
        _wait_healthy(self.url, self.proc, self.name)

    def __enter__(self) -> Self:
        self.start()
        try:
            self.ready()
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        _stop(self.proc)


class AppServer(_Process):
    """One app server instance (a master with ``workers`` processes) on a loopback port.

    ``env`` is added to this process's environment (DATABASE_URL, HUMANLIKE_EXPERIMENTS, ...)."""

    def __init__(self, env: dict[str, str], server: Server = DEFAULT_SERVER, workers: int = 2,
                 threads: int = 4, port: int | None = None):
        self.server = self.name = server
        self.port = port or free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.args, extra = app_command(server, self.port, workers, threads)
        self.env = dict(os.environ, HUMANLIKE_LOG_LEVEL="warning", HUMANLIKE_GRACEFUL_TIMEOUT="2")
        self.env.update(extra)
        self.env.update(env)
        self.proc: subprocess.Popen | None = None

    def workers(self) -> list[int]:
        """The worker processes' ids (children of the master)."""
        assert self.proc is not None
        out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(self.proc.pid)],
                             capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]


@contextlib.contextmanager
def running(*parts: AppServer | Caddy) -> Iterator[None]:
    """Start every part at once, wait until each answers, and stop them all (in reverse) after."""
    try:
        for part in parts:
            part.start()
        for part in parts:
            part.ready()
        yield
    finally:
        for part in reversed(parts):  # signal all, then wait: their graceful stops overlap
            if part.proc is not None and part.proc.poll() is None:
                part.proc.send_signal(signal.SIGTERM)
        for part in reversed(parts):
            part.__exit__()


def loopback_caddyfile(shipped: str) -> str:
    """The shipped Caddyfile for a loopback rehearsal: the same site block, with a global block
    that binds to 127.0.0.1 and turns the admin endpoint off (several may run at once)."""
    return "{\n\tadmin off\n\tdefault_bind " + LOOPBACK + "\n}\n\n" + shipped


def caddy_binary() -> str | None:
    """The ``caddy`` executable on PATH (``make caddy`` installs it), if any."""
    return shutil.which("caddy")


class Caddy(_Process):
    """Caddy with the shipped site block, serving http://127.0.0.1:PORT and balancing over
    ``upstreams`` (``host:port`` strings)."""

    def __init__(self, upstreams: list[str], port: int | None = None):
        binary = caddy_binary()
        if binary is None:
            raise RuntimeError("caddy is not installed (make caddy)")
        self.port = port or free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.home = Path(tempfile.mkdtemp(prefix="humanlike-caddy-"))
        self.config = self.home / "Caddyfile"
        self.config.write_text(loopback_caddyfile(CADDYFILE.read_text()))
        self.env = dict(os.environ, HUMANLIKE_SITE=self.url, HUMANLIKE_UPSTREAMS=" ".join(upstreams),
                        XDG_DATA_HOME=str(self.home / "data"), XDG_CONFIG_HOME=str(self.home / "config"))
        self.args = [binary, "run", "--config", str(self.config), "--adapter", "caddyfile"]
        self.name = "caddy"
        self.proc: subprocess.Popen | None = None

    def __exit__(self, *exc: object) -> None:
        super().__exit__()
        shutil.rmtree(self.home, ignore_errors=True)
