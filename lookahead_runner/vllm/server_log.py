"""Why a vLLM server stopped, read from its log: the exception it raised, and where that exception only points
elsewhere ("Engine core initialization failed. See root cause above."), the root cause raised before it.

vLLM 0.32 prints a failed start as several Python tracebacks, each process its own: a worker's (the cause, e.g.
"ValueError: Available memory on node 0 ... To resolve: decrease `--gpu-memory-utilization`"), the engine
core's wrapper ("Exception: WorkerProc initialization failed ... See stack trace for root cause."), and the API
server's ("RuntimeError: Engine core initialization failed. See root cause above."), the last one about 120
lines below the first. A traceback's lines may carry vLLM's log prefix ("(VllmWorker-0 pid=12) ERROR 12-03
17:06:06 [multiproc_executor.py:953] ") or none (a process's own stderr); an exception's message may run over
several lines (pydantic's "1 validation error for SpeculativeConfig" and the error under it). A log with no
traceback (argparse's "vllm serve: error: ...") falls back to its last error line.

Pure: log text in, one line out. tests/unit/vllm/test_server_log.py reads two real 0.32 logs.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# the colors vLLM's ColoredFormatter puts around the prefix's parts (VLLM_LOGGING_COLOR=1, FORCE_COLOR), even
# into a file; the lines are read without them
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")
# "(EngineCore pid=12) ERROR 11-29 23:16:55 [core.py:1088] " and the like, before a log message
LOG_PREFIX_RE = re.compile(r"^(\(\w[\w-]* pid=\d+\) )?(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\d-]+ [\d:]+ \[[^\]]*\] ")
_ERROR_LINE_RE = re.compile(r"(\b[A-Z]\w*(Error|Exception)\b|\berror\b|\[Errno \d+\])", re.IGNORECASE)
# wrappers that only point at the root cause printed before them
_WRAPPER_RE = re.compile(r"root cause|initialization failed|^Traceback|^\s*File \"", re.IGNORECASE)
# an exception that says its cause was printed before it
_POINTS_AWAY_RE = re.compile(r"root cause|see (the )?stack ?trace|inspect the stack ?trace", re.IGNORECASE)
# the line a traceback ends with: "ValueError: ...", "pydantic_core._pydantic_core.ValidationError: ...", "KeyboardInterrupt"
_RAISED_RE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Failure|Warning)|[A-Za-z_][\w.]*)"
                        r"(: (?P<message>.*))?$")
_NOISE = ("For further information visit",)  # pydantic's help URL under every validation error
TRACEBACK = "Traceback (most recent call last):"
MAX_LINES = 20_000  # a start failure's log is a few hundred lines; a long-running server's, the end counts
TRACEBACK_SPAN = 400  # lines of other processes that may interleave with one traceback


@dataclass(frozen=True)
class Raised:
    """One exception a traceback in the log ends with."""

    type: str            # its class, without the module path: "ValidationError"
    message: str         # its first line
    detail: str = ""     # the first line under it, where the message runs over several (pydantic's error)

    @property
    def points_away(self) -> bool:
        """It only says the cause was printed before it."""
        return bool(_POINTS_AWAY_RE.search(self.message))

    def text(self) -> str:
        head = f"{self.type}: {self.message}" if self.message else self.type
        return f"{head}: {self.detail}" if self.detail else head


def _records(log: str) -> list[tuple[str, str]]:
    """(writer, text) of every line: who wrote it, as its log prefix says (process and level, not the time; ""
    for a bare line), and what follows the prefix."""
    out = []
    for line in ANSI_RE.sub("", log).splitlines()[-MAX_LINES:]:
        match = LOG_PREFIX_RE.match(line)
        writer = f"{match.group(1) or ''}{match.group(2)}" if match else ""
        out.append((writer, line[match.end():].rstrip() if match else line.rstrip()))
    return out


def _next_of(lines: list[tuple[str, str]], index: int, writer: str) -> int:
    """The index of the next line `writer` wrote at or after `index` (other processes' lines interleave), or
    len(lines) when none follows within TRACEBACK_SPAN lines."""
    for at in range(index, min(len(lines), index + TRACEBACK_SPAN)):
        if lines[at][0] == writer:
            return at
    return len(lines)


def raised(log: str) -> list[Raised]:
    """Every exception the log's tracebacks end with, in the order printed."""
    lines = _records(log)
    out: list[Raised] = []
    index = 0
    while index < len(lines):
        writer, text = lines[index]
        index += 1
        if text.strip() != TRACEBACK:
            continue
        header = index
        # the frames: the writer's indented lines, up to its first one at the margin
        index = _next_of(lines, index, writer)
        while index < len(lines) and lines[index][1][:1] in (" ", "\t", ""):
            index = _next_of(lines, index + 1, writer)
        match = _RAISED_RE.match(lines[index][1].strip()) if index < len(lines) else None
        if not match:  # cut short (its process killed as it printed): the lines after its header are read on
            index = header if index >= len(lines) else index
            continue
        index += 1
        # a message that runs over several lines goes on indented (pydantic's error under its count)
        after = _next_of(lines, index, writer)
        follow = lines[after][1] if after < len(lines) else ""
        detail = follow.strip() if follow[:1].isspace() and not follow.strip().startswith(_NOISE) else ""
        out.append(Raised(match.group("type").rsplit(".", 1)[-1], (match.group("message") or "").strip(), detail))
    return out


def cause(log: str) -> str:
    """Why the server stopped, as one line: the last exception raised, or where it points back (vLLM's "See root
    cause above"), the last one before it that does not, with the wrapper named after it; a log without a
    traceback: its last error line."""
    found = raised(log)
    if not found:
        return last_error_line(log)
    final = found[-1]
    if not final.points_away:
        return final.text()
    root = next((r for r in reversed(found[:-1]) if not r.points_away), None)
    if root is None:
        return final.text()
    return f"{root.text()} (the root cause of {final.type}: {final.message.split('. ')[0].rstrip('.')})"


def last_error_line(log: str) -> str:
    """The last line of the log that names an error and is not a wrapper pointing elsewhere, without its log
    prefix; else the last line."""
    lines = [LOG_PREFIX_RE.sub("", line).strip() for line in ANSI_RE.sub("", log).splitlines()]
    lines = [line for line in lines if line]
    for line in reversed(lines):
        if _ERROR_LINE_RE.search(line) and not _WRAPPER_RE.search(line):
            return line
    return lines[-1] if lines else "no output"
