"""Nothing a sweep started outlives it, however the runner ends.

Servers and Locust run in sessions of their own, so one group signal stops all their processes;
the flip side is that they would survive a runner killed with SIGKILL (or by the OOM killer), still
holding the GPU and the port. Two lines of defence:

* While a sweep runs, a watchdog (`python -m lookahead_runner.run.life.reaper`, its own session, asleep on a
  pipe) holds the read end of a pipe; the runner writes "+PGID GRACE_S" / "-PGID" to it as groups
  start and stop. When the runner ends, however it ends, the pipe closes: the watchdog stops the
  groups still listed (SIGTERM, then SIGKILL after their grace period) and exits. A Ray slot's process
  (cluster/worker_life.py) also lists its scratch folders ("@PATH"), which the watchdog removes then: a slot
  killed mid-life leaves no files on its node.
* `--resume` first stops what an earlier runner of that run folder left behind (for when the
  watchdog was killed too): servers whose server.json has a pid but no exit code, and Locust
  processes writing into the folder.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

_watchdog: subprocess.Popen | None = None


def start_watchdog(label: str = "") -> None:
    """Start the watchdog of this runner (one per process; `label` only names it in `ps`)."""
    global _watchdog
    if _watchdog is not None and _watchdog.poll() is None:
        return
    _watchdog = subprocess.Popen([sys.executable, "-m", "lookahead_runner.run.life.reaper", *([label] if label else [])],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 text=True, start_new_session=True)


def stop_watchdog(timeout_s: float = 60.0) -> None:
    """Close the pipe: the watchdog stops whatever is still listed (nothing after a clean run) and exits."""
    global _watchdog
    watchdog, _watchdog = _watchdog, None
    if watchdog is None:
        return
    try:
        watchdog.stdin.close()
    except OSError:
        pass
    try:
        watchdog.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        watchdog.kill()
        watchdog.wait()


@contextmanager
def watchdog(label: str = ""):
    """The watchdog for the duration of a sweep."""
    start_watchdog(label)
    try:
        yield
    finally:
        stop_watchdog()


def _send(line: str) -> None:
    if _watchdog is None:
        return
    try:
        _watchdog.stdin.write(line + "\n")
        _watchdog.stdin.flush()
    except (OSError, ValueError):  # the watchdog is gone: the runner's own cleanup still runs
        pass


def register(pgid: int, grace_s: float = 5.0) -> None:
    """A process group started by this runner (its leader's pid)."""
    _send(f"+{pgid} {grace_s:g}")


def unregister(pgid: int) -> None:
    """That group has been stopped and reaped by the runner."""
    _send(f"-{pgid}")


def remove_at_exit(folder: Path) -> None:
    """A scratch folder of this process, removed by the watchdog when the process ends (if it is still there)."""
    _send(f"@{folder}")


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stop_groups(groups: dict[int, float]) -> None:
    """SIGTERM every group, SIGKILL the ones left after the longest grace period."""
    own = os.getpgid(0)
    groups = {pgid: grace for pgid, grace in groups.items() if pgid > 1 and pgid != own}
    for pgid in groups:
        _kill_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + max(groups.values(), default=0.0)
    while any(_group_alive(pgid) for pgid in groups) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pgid in groups:
        _kill_group(pgid, signal.SIGKILL)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def reap_stale(run_dir: Path, grace_s: float = 5.0) -> list[str]:
    """Stop the servers and Locust processes an earlier runner of `run_dir` left running.

    Returns one description per group stopped. A recorded pid that now belongs to another process
    (its start time differs from the record's) is left alone."""
    import psutil

    run_dir = Path(run_dir).resolve()
    own = os.getpgid(0)
    found: dict[int, str] = {}
    for record_path in run_dir.glob("*/r*/server.json"):
        try:
            record = json.loads(record_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        pid = record.get("pid")
        if not isinstance(pid, int) or "exit_code" in record or record.get("external"):
            continue
        try:
            started = psutil.Process(pid).create_time()
            if abs(started - float(record.get("t_start_s", 0))) > 5.0:
                continue  # the pid was reused by an unrelated process
        except psutil.NoSuchProcess:
            if not _group_alive(pid):  # leader gone; its group (engine workers) may live on
                continue
        except psutil.Error:
            continue
        found[pid] = f"server pid {pid} ({record_path.parent.relative_to(run_dir)})"
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        try:
            cmdline = proc.info["cmdline"] or []
            if "--requests-csv" not in cmdline[:-1]:
                continue
            target = Path(proc.info["cwd"] or "/", cmdline[cmdline.index("--requests-csv") + 1]).resolve()
            if run_dir in target.parents:
                found.setdefault(os.getpgid(proc.pid), f"Locust pid {proc.pid} ({target.parent.relative_to(run_dir)})")
        except (psutil.Error, OSError, ValueError):
            continue
    found.pop(own, None)
    stop_groups({pgid: grace_s for pgid in found})
    return list(found.values())


def main(argv: list[str] | None = None) -> int:
    """The watchdog: read "+PGID GRACE_S" / "-PGID" / "@FOLDER" lines until EOF, then stop what is listed and
    remove the folders."""
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # a terminal's signals are the runner's to handle

    def terminated(signum, frame):
        raise _Terminated

    signal.signal(signal.SIGTERM, terminated)  # stop what is listed now, then exit
    groups: dict[int, float] = {}
    folders: list[str] = []
    try:
        for line in sys.stdin:
            if line.startswith("@"):
                folders.append(line[1:].rstrip("\n"))
                continue
            head, _, grace = line.strip().partition(" ")
            try:
                if head.startswith("+"):
                    groups[int(head[1:])] = float(grace or 5.0)
                elif head.startswith("-"):
                    groups.pop(int(head[1:]), None)
            except ValueError:
                continue
    except _Terminated:
        pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop_groups(groups)
    for folder in folders:  # after the groups: a server or Locust may still be writing there until stopped
        shutil.rmtree(folder, ignore_errors=True)
    return 0


class _Terminated(Exception):
    pass


if __name__ == "__main__":
    sys.exit(main())
