"""A per-batch-size schedule from the per-stage picks: K keyed by the real batch each stage measured.

Only stages the engine decided anchor a range (a guessed K would be handed out as a setting);
how the ranges are written into `vllm serve` is a vLLM fact (vllm/schedule.py).
"""
from __future__ import annotations

from ...vllm.schedule import Schedule, render_argv
from ..schema import PerBatchSchedule, StagePick

OPEN_END = 1_000_000


def ranges_from(points: list[tuple[float, int]]) -> list[list[int]]:
    """[(real batch, K)] -> [[lo, hi, K]]: boundaries halfway between measured batches, the first range
    from 1, the last open-ended, neighbours with the same K merged."""
    points = sorted(points)
    ranges, lo = [], 1
    for i, (batch, k) in enumerate(points):
        hi = OPEN_END if i == len(points) - 1 else max(lo, int((batch + points[i + 1][0]) / 2))
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = hi
        else:
            ranges.append([lo, hi, k])
        lo = hi + 1
    return ranges


def schedule_from_picks(picks: list[StagePick], argv_by_k: dict[int, list[str]],
                        form: str | None) -> PerBatchSchedule | None:
    """The schedule when decided stages want different K and the server takes one (its form, as the probe
    asked it: None when it takes none)."""
    decided = [p for p in picks if p.status == "decided" and p.k is not None and p.running_mean is not None]
    if form is None or len({p.k for p in decided}) < 2:
        return None
    schedule = Schedule.from_ranges(ranges_from([(p.running_mean, p.k) for p in decided]), form)
    left_out = [p.users for p in picks if p not in decided]
    return PerBatchSchedule(num_speculative_tokens_per_batch_size=schedule.value(), ranges=schedule.as_lists(),
                            argv=render_argv(schedule, argv_by_k), form=form,
                            anchored_on_users=[p.users for p in decided], left_out_users=left_out)
