"""``--stages`` parsing and the stage schedule: pure, importable without Locust (no gevent patching).

A stage is closed loop (``USERS:SECONDS``: that many users, each sending its next request when its last one
ended) or open loop (``RATE/s:SECONDS``: requests arrive at RATE per second whatever is outstanding;
workload/arrivals.py draws their times, workload/dispatcher.py sends them). Both kinds mix in one list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

STAGES_OPTION = "--stages"
RATE_SUFFIX = "/s"
# Beyond --stop-timeout, how long the shape waits for the last kind's users to stop when the kind of stage changes
DRAIN_GRACE_S = 5.0
# A rate stage's schedule is drawn whole in every Locust process (workload/arrivals.py): 80 MB of float64 at this
MAX_STAGE_ARRIVALS = 10_000_000


def too_many_arrivals(rate: float, duration_s: float) -> str:
    """Why a rate stage's schedule is too large to draw ("" where it is not)."""
    if rate * duration_s <= MAX_STAGE_ARRIVALS:
        return ""
    return (f"rate x duration_s = {rate * duration_s:.3g} arrivals in one stage; at most {MAX_STAGE_ARRIVALS} "
            "arrivals (the schedule is drawn whole): lower the rate or split the stage")


@dataclass(frozen=True)
class Stage:
    """Hold `users` concurrent users (closed loop) for `duration_s` seconds; or, with `rate`, send `rate`
    requests per second (open loop; `users` is 0)."""

    users: int
    duration_s: float
    rate: float | None = None

    @property
    def is_rate(self) -> bool:
        return self.rate is not None

    @property
    def label(self) -> str:
        return load_label(self.users, self.rate)

    def arg(self) -> str:
        """Its ``--stages`` item."""
        return f"{self.rate:g}{RATE_SUFFIX}:{self.duration_s:g}" if self.rate is not None \
            else f"{self.users}:{self.duration_s:g}"


def load_label(users: int | None, rate: float | None) -> str:
    """How a person names a stage's load: "16 users" or "4 req/s"."""
    return f"{rate:g} req/s" if rate is not None else f"{users} users"


def parse_stages(text: str) -> list[Stage]:
    """Parse "USERS:SECONDS" and "RATE/s:SECONDS" items (e.g. "4:20,16:20" or "2/s:30,8.5/s:30");
    ValueError naming the option otherwise."""
    expected = ("expected USERS:SECONDS or RATE/s:SECONDS items, comma-separated, with USERS >= 1, RATE > 0 "
                "(requests per second) and SECONDS > 0, e.g. 4:20,16:20 or 2/s:30,8/s:30")
    items = [item.strip() for item in str(text).split(",")]
    if not any(items):
        raise ValueError(f"{STAGES_OPTION}: empty; {expected}")
    stages = []
    for item in items:
        load_text, sep, seconds_text = item.partition(":")
        rate_text = load_text.strip()[:-len(RATE_SUFFIX)] if load_text.strip().endswith(RATE_SUFFIX) else None
        try:
            if not sep:
                raise ValueError
            duration_s = float(seconds_text)
            if rate_text is not None:
                rate, users = float(rate_text), 0
                if not 0 < rate < float("inf"):
                    raise ValueError
            else:
                rate, users = None, int(load_text)
                if users < 1:
                    raise ValueError
        except ValueError:
            raise ValueError(f"{STAGES_OPTION}: bad stage {item!r}; {expected}") from None
        if not duration_s > 0 or duration_s == float("inf"):
            raise ValueError(f"{STAGES_OPTION}: bad stage {item!r}; {expected}")
        if rate is not None and (why := too_many_arrivals(rate, duration_s)):
            raise ValueError(f"{STAGES_OPTION}: bad stage {item!r}; {why}")
        stages.append(Stage(users=users, duration_s=duration_s, rate=rate))
    return stages


def stage_at(stages: Sequence[Stage], elapsed_s: float) -> int | None:
    """Index of the stage scheduled at `elapsed_s` seconds into the run, None once all have ended."""
    end_s = 0.0
    for index, stage in enumerate(stages):
        end_s += stage.duration_s
        if elapsed_s < end_s:
            return index
    return None


def stage_start_s(stages: Sequence[Stage], index: int) -> float:
    """Seconds into the run at which stage `index` is scheduled to start."""
    return float(sum(stage.duration_s for stage in stages[:index]))


def kind_changes(stages: Sequence) -> int:
    """How often the stages change between users and rate: each change waits for a drain (workload/shape.py)."""
    kinds = [getattr(stage, "rate", None) is not None for stage in stages]
    return sum(a != b for a, b in zip(kinds, kinds[1:]))


def rate_run(stages: Sequence[Stage], index: int) -> range:
    """The consecutive rate stages that start at `index` (empty when it is a user stage): one dispatcher
    schedule runs through them without a gap."""
    end = index
    while end < len(stages) and stages[end].is_rate:
        end += 1
    return range(index, end)
