"""Locust master/worker plumbing: every worker's raw request rows reach the master's requests.csv.

With ``--processes N`` (forked workers on this host) or ``--master`` / ``--worker`` across hosts,
users run on the workers and only the master writes files. Three custom messages:

- worker -> master ``lookahead_rows``: the rows a worker finished, batched about once a second and
  at every stop (a worker sends them before it reports "client_stopped", and Locust's messages
  from one worker arrive in order, so the master has every row when its test_stop fires);
- master -> workers ``lookahead_stage``: the stage the master's shape opened, sent before the
  spawn message of that stage, so workers tag each request with the stage it was sent in;
- worker -> master ``lookahead_workload``: how the worker builds prompts (workload.json);
- master -> workers ``lookahead_rate``: a run of rate stages started (its stages, its start in unix seconds,
  how many dispatchers share it), sent before its spawn message; each worker's dispatcher sends its share.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

logger = logging.getLogger(__name__)

MSG_ROWS = "lookahead_rows"
MSG_STAGE = "lookahead_stage"
MSG_WORKLOAD = "lookahead_workload"
MSG_RATE = "lookahead_rate"


class RowForwarder:
    """A request log for a worker: buffers rows and sends them to the master on `flush()`.

    Same interface as records.CsvAppender (append / flush / close); after `close()` each row is
    sent at once, as cut requests can end after the scenario closed its logs.
    """

    def __init__(self, send: Callable[[str, Any], None], columns: Sequence[str]) -> None:
        self._send = send
        self.columns = tuple(columns)
        self._pending: list[list[str]] = []
        self.closed = False
        self.rows_sent = 0

    def append(self, row: Sequence[str]) -> None:
        if len(row) != len(self.columns):
            raise ValueError(f"row has {len(row)} cells, expected {len(self.columns)}")
        self._pending.append(list(row))
        if self.closed:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        rows, self._pending = self._pending, []
        try:
            self._send(MSG_ROWS, {"rows": rows})
        except Exception as exc:  # the master is gone: nothing else can receive them
            logger.error("Could not send %d request rows to the master: %s", len(rows), exc)
            return
        self.rows_sent += len(rows)

    def close(self) -> None:
        self.flush()
        self.closed = True


def rows_from_message(data: Any, columns: Sequence[str]) -> list[list[str]]:
    """The well-formed rows of a ``lookahead_rows`` message (others are logged and dropped)."""
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        logger.error("Dropping a malformed %s message", MSG_ROWS)
        return []
    good = [row for row in rows if isinstance(row, list) and len(row) == len(columns)]
    if len(good) != len(rows):
        logger.error("Dropping %d malformed request rows from a worker", len(rows) - len(good))
    return [[str(cell) for cell in row] for row in good]


def stage_from_message(data: Any) -> tuple[int, int] | None:
    if isinstance(data, list) and len(data) == 2 and all(isinstance(v, int) for v in data):
        return data[0], data[1]
    logger.error("Dropping a malformed %s message: %r", MSG_STAGE, data)
    return None


class WorkloadRecord:
    """workload.json: the latest description a process reported, plus which processes reported what."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.info: dict[str, Any] = {}
        self.methods_by_client: dict[str, str] = {}

    def add(self, info: dict[str, Any]) -> None:
        client = str(info.get("client", ""))
        self.info = {key: value for key, value in info.items() if key != "client"}
        self.methods_by_client[client] = str(info.get("prompt_method", ""))
        self.write()

    def write(self) -> None:
        if not self.path or not self.info:
            return
        document = dict(self.info)
        methods = set(self.methods_by_client.values())
        if len(methods) > 1:
            document["prompt_method"] = "mixed"
        document["clients"] = dict(sorted(self.methods_by_client.items()))
        write_json_atomic(self.path, document)


def write_json_atomic(path: str, document: dict[str, Any]) -> None:
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)
