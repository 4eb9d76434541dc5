"""One vLLM server life: start in its own session, wait until ready, stop the whole group.

`vllm serve` spawns engine processes; starting it in a new session puts them all in one
process group, so stopping signals the group and nothing is left holding the GPU or the port.
Its output is read through a pipe and written to server.log with every secret masked (config/masking.py).
"""
from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from contextlib import contextmanager
from pathlib import Path

from . import reaper
from ...contracts.auth import keyed_request
from ...config.masking import PLACEHOLDER_RE, MissingSecret, Secrets, StreamMasker
from .placement import pin
from ...vllm.endpoints import HEALTH_PATH
from ...vllm.server_log import cause

LOG_READ_BYTES = 8 << 20  # the end of the log read for why a server stopped (a failed start writes a few KiB)


class ServerError(RuntimeError):
    """The server failed to start or become ready; the message carries the reason."""


class StartFailed(ServerError):
    """The server process exited before it was ready; `cause` is why, from its log (vllm/server_log.py)."""

    def __init__(self, message: str, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


def free_port(host: str = "127.0.0.1") -> int:
    """A port free right now (another process may take it before the server binds it)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_taken(host: str, port: int, wait_s: float = 5.0) -> bool:
    """True when host:port stays in use by another process for `wait_s`. An address that is not this
    machine's (a server on another host) cannot be checked here and counts as free."""
    deadline = time.monotonic() + wait_s
    while True:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
                return False
            except OSError as err:
                if err.errno != errno.EADDRINUSE:
                    return False
        if time.monotonic() >= deadline:
            return True
        time.sleep(0.2)


def tail(path: Path, lines: int = 8) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "\n".join(line.rstrip() for line in deque(handle, maxlen=lines))
    except OSError:
        return ""


class LogCopier(threading.Thread):
    """Copies the server's output from its pipe to the log file as it comes, masked; every write is
    flushed, and what is left at the end of the stream (a crash's last line) is written too."""

    def __init__(self, pipe, log_path: Path, masker: StreamMasker) -> None:
        super().__init__(name=f"log copier of {log_path}", daemon=True)
        self.pipe, self.log_path, self.masker = pipe, log_path, masker

    def run(self) -> None:
        try:
            with open(self.log_path, "ab") as log:
                for chunk in iter(lambda: self.pipe.read1(65536), b""):
                    log.write(self.masker.feed(chunk))
                    log.flush()
                log.write(self.masker.flush())
        except OSError:  # a full disk: the run's own writes say so; the server must not block on its pipe
            while self.pipe.read1(65536):
                pass
        finally:
            self.pipe.close()


class ServerProcess:
    """Owns one server process group, its log file and its server.json record.

    `argv` and `env` are as recorded: secret values stand as `${NAME}`, filled in from `secrets` only
    for the process itself."""

    def __init__(self, argv: list[str], base_url: str, log_path: Path, env: dict[str, str] | None = None,
                 stop_grace_s: float = 15.0, headers: dict[str, str] | None = None,
                 secrets: Secrets | None = None, cpus: tuple[int, ...] = ()) -> None:
        self.argv = argv
        self.cpus = cpus  # the CPUs its process tree may run on (placement.py); () = any
        self.base_url = base_url.rstrip("/")
        self.log_path = log_path
        self.env = env or {}
        self.stop_grace_s = stop_grace_s
        self.headers = headers or {}
        self.secrets = secrets or Secrets()
        self.process: subprocess.Popen | None = None
        self._copier: LogCopier | None = None
        self.record: dict = {"argv": argv, "base_url": self.base_url, **({"cpus": list(cpus)} if cpus else {})}
        secret_env = sorted(key for key, value in self.env.items() if PLACEHOLDER_RE.search(value))
        if secret_env:  # names only: these variables carry secrets to the server
            self.record["secret_env"] = secret_env

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    def start(self) -> None:
        try:
            argv, env = self.secrets.resolve_argv(self.argv), self.secrets.resolve_env(self.env)
        except MissingSecret as err:
            raise ServerError(str(err)) from None
        try:
            self.process = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=os.environ | {"PYTHONUNBUFFERED": "1"} | env, start_new_session=True,
                preexec_fn=pin(self.cpus),
            )
        except OSError as err:
            raise ServerError(f"cannot start {self.argv[0]!r}: {err.strerror}") from None
        self._copier = LogCopier(self.process.stdout, self.log_path, StreamMasker(self.secrets))
        self._copier.start()
        reaper.register(self.process.pid, self.stop_grace_s)
        self.record.update(pid=self.process.pid, t_start_s=time.time())
        self._save()

    def wait_until_ready(self, timeout_s: float, on_poll=None) -> float:
        """Poll /health until 200; fail at once if the process exits. Returns seconds waited.
        `on_poll` runs on every poll (the runner samples memory while the server starts)."""
        assert self.process is not None
        started = time.monotonic()
        deadline = started + timeout_s
        while time.monotonic() < deadline:
            if on_poll:
                on_poll()
            code = self.process.poll()
            if code is not None:
                why = self.why_stopped()
                raise StartFailed(f"server exited with code {code} before it was ready: {why}\n{self.log_tail(40)}",
                                  why)
            if self._health_ok():
                waited = time.monotonic() - started
                self.record.update(ready_s=round(waited, 3), t_ready_s=time.time())
                self._save()
                return waited
            time.sleep(0.25)
        raise ServerError(f"server not ready after {timeout_s:.0f} s (raise server.ready_timeout_s, or see server.log)\n"
                          f"{tail(self.log_path)}")

    def _health_ok(self) -> bool:
        request = keyed_request(self.base_url + HEALTH_PATH, self.headers)
        try:
            with urllib.request.urlopen(request, timeout=2.0) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """SIGTERM the group, SIGKILL it after the grace period, reap. Returns the exit code.

        Ctrl-C / SIGTERM / SIGHUP arriving meanwhile cannot cut this short (that would leave the
        engine processes running): they skip the rest of the grace period instead, and are raised
        once the group is gone."""
        if self.process is None:
            return None
        with signals_deferred() as caught:
            pgid = self.process.pid  # the leader of its own session: its pid is the group id
            _signal_group(pgid, signal.SIGTERM)
            deadline = time.monotonic() + self.stop_grace_s
            while self.process.poll() is None and time.monotonic() < deadline and not caught:
                time.sleep(0.05)
            _signal_group(pgid, signal.SIGKILL)  # engine workers may outlive the API server
            code = self.process.wait()
            self.log_written()
            reaper.unregister(pgid)
            self.record.update(exit_code=code, t_stop_s=time.time())
            self._save()
        return code

    def log_written(self, timeout_s: float = 5.0) -> None:
        """Wait until the copier has written what the exited server printed (its engine processes may
        hold the pipe a moment longer)."""
        if self._copier is not None:
            self._copier.join(timeout_s)

    def why_stopped(self, last_lines: int | None = None) -> str:
        """Why the exited server stopped: the exception its log says it raised (vllm/server_log.py), read from the
        whole log (a failed start), or from its `last_lines` (a server that died later: an exception it logged
        and survived earlier is not the cause)."""
        self.log_written()
        try:
            with open(self.log_path, "rb") as handle:
                handle.seek(max(0, handle.seek(0, os.SEEK_END) - LOG_READ_BYTES))
                text = handle.read().decode("utf-8", errors="replace")
        except OSError:
            return "no log"
        return cause("\n".join(text.splitlines()[-last_lines:]) if last_lines else text)

    def log_tail(self, lines: int = 8) -> str:
        """The end of the log; once the process has exited, with everything it printed."""
        if self.process is not None and self.process.poll() is not None:
            self.log_written()
        return tail(self.log_path, lines)

    def _save(self) -> None:
        path = self.log_path.with_name("server.json")
        path.write_text(json.dumps(self.record, indent=1), encoding="utf-8")

    def __enter__(self) -> "ServerProcess":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


@contextmanager
def signals_deferred():
    """While a process group is being stopped, Ctrl-C, SIGTERM and SIGHUP are recorded (the
    yielded list) instead of raised; the first is raised as KeyboardInterrupt afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield []
        return
    caught: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: caught.append(signum))
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
                if signal.getsignal(sig) != signal.SIG_IGN}  # what nohup ignores stays ignored
    try:
        yield caught
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if caught:
        raise KeyboardInterrupt(f"signal {caught[0]}")


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def wait_for_port_free(host: str, port: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if port_is_free(host, port):
            return True
        time.sleep(0.2)
    return False


class RunningServer(ServerProcess):
    """A server started by someone else (another host, a shared deployment): never started or
    stopped here, only checked for health. `alive()` asks /health."""

    def __init__(self, base_url: str, log_path: Path, headers: dict[str, str] | None = None) -> None:
        super().__init__([], base_url, log_path, headers=headers)
        self.record["external"] = True

    def start(self) -> None:
        self.log_path.write_text(f"external server at {self.base_url}: not started by lookahead-runner\n")
        self.record.update(t_start_s=time.time())
        self._save()

    def wait_until_ready(self, timeout_s: float, on_poll=None) -> float:
        started = time.monotonic()
        while time.monotonic() - started < min(timeout_s, 30.0):
            if self._health_ok():
                self.record.update(ready_s=0.0, t_ready_s=time.time())
                self._save()
                return 0.0
            time.sleep(0.5)
        raise ServerError(f"server.url {self.base_url}: /health did not answer 200; is the server up?")

    def alive(self) -> bool:
        return self._health_ok()

    def stop(self) -> int | None:
        return None
