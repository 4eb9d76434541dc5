"""CPU lists as taskset -c and docker --cpuset-cpus write them ("0-3,6"): read and written (pure)."""
from __future__ import annotations

from collections.abc import Iterable


def parse_cpus(text: str) -> tuple[int, ...]:
    """A CPU list ("0-3,6", as taskset -c and docker --cpuset-cpus write it) -> sorted CPU numbers."""
    cpus: set[int] = set()
    for part in str(text).replace(" ", "").split(","):
        if not part:
            raise ValueError(f"{text!r} is not a CPU list; write e.g. \"0-3,6\"")
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{text!r} is not a CPU list; write e.g. \"0-3,6\"")
        first, last = int(low), int(high) if dash else int(low)
        if last < first:
            raise ValueError(f"{text!r}: the range {part} runs backwards; write e.g. \"{last}-{first}\"")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpus(cpus: Iterable[int]) -> str:
    """Sorted CPU numbers -> the shortest CPU list ("0-3,6")."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    start = previous = None
    for cpu in ordered + [None]:
        if start is not None and (cpu is None or cpu != previous + 1):
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if cpu is not None and start is None:
            start = cpu
        previous = cpu
    return ",".join(parts)
