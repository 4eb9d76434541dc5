"""A first server life that exits before it is ready, for a cause every life of the sweep shares: the sweep stops
there instead of starting the rest.

Where the lives differ in K alone (no grid axis: the same argv but the speculation flags), a server that cannot
start with the first life's (the smallest K, usually the baseline without any) cannot start with a larger K
either: a model path, a flag, the memory the model needs, vLLM itself are the same, and speculation only adds a
draft to load. On a GPU each such start costs minutes of loading before it fails, so the sweep says why once and
stops. Nothing was measured, so the fix is a fresh sweep: `--resume` reruns the config plan.json recorded, which
helps only for a cause outside it (memory another process held), and runs every life then. A later life failing
at start (after a life did start) is that setting's own failure: the sweep goes on, and the report lists it; so
is a first start that met a port another process took, or was stopped from outside (NOT_SHARED_RE). On a Ray
cluster lives start side by side, so there is no first life to stop at.
"""
from __future__ import annotations

import re
from pathlib import Path

from ...config import SweepConfig
from ...runfolder import results
from ...runfolder.plan import life_state
from ..life.launch import Life
from ..life.life import Outcome
from ..life.server import ServerError


# causes of a failed start that are that start's alone, not the server's: a port another process took between
# free_port() and the bind (vLLM's API port, its ZMQ and torch.distributed ports; EADDRINUSE = errno 98 on Linux),
# a server stopped from outside while it started (vLLM raises KeyboardInterrupt("terminated") on SIGTERM; a
# process ended by SIGHUP, SIGINT or SIGTERM)
NOT_SHARED_RE = re.compile(r"address already in use|EADDRINUSE|\[Errno 98\]|KeyboardInterrupt|"
                           r"exited with code -(1|2|15) ", re.IGNORECASE)


class SharedStartFailure(ServerError):
    """The first server life exited before it was ready, and every other life starts the same server but for K."""


def may_stop_at_first_start(config: SweepConfig, run_dir: Path, lives: list[Life], server_starts: int,
                            on_cluster: bool) -> bool:
    """Whether the sweep's first server start decides for all: its lives differ in K alone, more than one start
    is planned, here (not on Ray slots), and no life of this run folder has run to its end (a --resume after
    one did: the server could start then)."""
    if on_cluster or config.grid.axis or config.server.url or server_starts < 2:
        return False
    return not any(life_state(results.life_dir(run_dir, life.setting.name, life.repeat)) == "done" for life in lives)


def stop_if_shared(outcomes: list[Outcome], life: Life, server_starts: int, run_dir: Path) -> None:
    """Raise SharedStartFailure when the first server life (hosting `life`) exited before it was ready, for a
    cause other than NOT_SHARED_RE's."""
    if not outcomes or not outcomes[0].start_failed:
        return
    why = outcomes[0].reason.splitlines()[0].rstrip(".")
    if NOT_SHARED_RE.search(why):  # the next life starts on other ports, unless stopped the same way
        return
    others = server_starts - 1
    raise SharedStartFailure(
        f"{life.key}: {why}; the sweep's {others} other server {'lives start' if others > 1 else 'life starts'} "
        f"the same server with another K, so {'each' if others > 1 else 'it'} would fail alike: stopped before "
        f"starting {'them' if others > 1 else 'it'}. Nothing was measured: fix the cause (the log: "
        f"{results.life_dir(run_dir, life.setting.name, life.repeat) / 'server.log'}) and start the sweep again; "
        f"--resume {run_dir} would rerun the config this folder recorded (for a cause outside it, e.g. GPU memory "
        "another process held)")
