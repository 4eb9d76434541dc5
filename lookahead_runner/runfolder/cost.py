"""What a verdict cost: server lives and server-seconds (start to ready, and measuring), measured per life
from each life's status.json, GPU-seconds and the wall time, beside what the full grid would have cost.

GPU-seconds: each life's server-seconds x the GPUs it held: on a Ray cluster its slot's GPUs as status.json
names them (a local Ray's "ray-gpu:N" slots count, the simulator's too); here, tensor x pipeline x data parallel
of server.extra_args (1 by default), the simulator counted like the server it stands for, so a sweep costs the same
GPU-seconds here and on slots. The wall time runs from the first life's start to the last life's end (t_start_s,
t_s), lives in parallel counted once; None when a life did not record its start (a folder from before it did).

Pure: plan.json's lives and the lives' status.json in (typed, plan.py), a `Cost` out. The grid's figure is
an estimate: its server starts at the mean start measured in this run, its loads at the mean measured load
of a life that ran every stage (the stages' planned seconds when none did), the same confirmation lives.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import SweepConfig
from ..decision.schema import Cost
from ..decision.cells.rate_cell import same_rate
from .plan import SPREAD_PURPOSE, LifeStatus, PlannedLife

RUN_STATES = ("done", "failed")   # a life that started (a skipped or never-started one cost nothing)


@dataclass(frozen=True)
class LifeCost:
    life: str
    k: int
    confirm: bool
    new_server: bool       # false for a same-server repeat: its start is booked on the life that started it
    start_s: float
    measure_s: float
    all_stages: bool       # false for an adaptive life that ran a subset of the stages
    done: bool             # measured to the end (a failed start is cut short: not a start to price the grid at)
    gpus: int | None = None          # the GPUs its Ray slot held; None: run here (parallel_gpus of extra_args)
    t_start_s: float | None = None   # epoch seconds: its server's start (None: not recorded) ...
    t_end_s: float | None = None     # ... and its end
    spread: bool = False             # adaptive: chosen to measure the restart spread (PlannedLife.purpose)


@dataclass(frozen=True)
class LivesRange:
    best: int
    expected: float | None
    worst: int
    basis: str = ""          # where the expected comes from, or why there is none
    # the seconds of load of those lives (best, expected, worst) where they differ in what they run (the adaptive
    # sweep's repeat runs the target stage alone: load_seconds); None: every life runs every stage
    seconds: tuple[float, float | None, float] | None = None



def life_costs(plan_lives: list[PlannedLife], statuses: dict[str, LifeStatus]) -> list[LifeCost]:
    """The lives that ran, each with its server-seconds as its status.json recorded them (0 when missing)."""
    out = []
    for entry in plan_lives:
        status = statuses.get(entry.dir)
        if status is None or status.state not in RUN_STATES:
            continue
        new_server = (status.server_life or entry.dir) == entry.dir
        out.append(LifeCost(entry.dir, entry.k, entry.confirms, new_server,
                            (status.start_s or 0.0) if new_server else 0.0, status.measure_s or 0.0,
                            not entry.stages and not entry.rates, status.state == "done",
                            len(status.gpus) if status.slot else None,
                            status.t_start_s, status.t_s, entry.purpose == SPREAD_PURPOSE))
    return out


def load_seconds(config: SweepConfig) -> tuple[float, float]:
    """(a K's first life, a repeat): the seconds of stages each runs, every workload variant's. Every stage, but
    the adaptive sweep's repeat runs the target stage alone (adaptive_sweep.stages_of): the users target's (with the
    rate stages beside it), or with rate stages only the target rate's."""
    variants = len(config.load.variants)
    every = sum(stage.duration_s for stage in config.load.stages) * variants
    if config.sweep.strategy != "adaptive":
        return every, every
    rate = config.adaptive_rate
    if rate is not None:
        target = [stage for stage in config.load.rate_stages if same_rate(stage.rate, rate)]
    else:
        target = [stage for stage in config.load.stages if stage.is_rate or stage.users == config.target_users]
    return every, sum(stage.duration_s for stage in target) * variants


# the adaptive sweep at a rate with an SLO: capacity probes beside its default cap of lives, per K of the sweep,
# where the verdict hangs on a capacity the rates measured leave open (run/strategies/adaptive_sweep.capacity_probe):
# room for a bisection on each side of the pair it hangs on, or a firmer end each; on the simulator's K 0/4 at 8, 16
# and 60 req/s, 3 probes settled it where it was settled (3 of 5 runs; tests/e2e/test_rate_adaptive_sim.py)
CAPACITY_PROBES_PER_K = 2


def capacity_probes(config: SweepConfig) -> int:
    """The probe lives an adaptive sweep at a rate may add past its default cap of lives (0 elsewhere: no capacity
    decides; and where sweep.max_lives is given, which caps every life, probes too)."""
    if (config.sweep.strategy != "adaptive" or config.adaptive_rate is None or not config.decision.slos
            or config.sweep.max_lives):
        return 0
    return CAPACITY_PROBES_PER_K * len(config.speculation.k)


def probe_load_s(config: SweepConfig) -> float:
    """A capacity probe's seconds of load: one rate stage as long as the longest (probes.probe_stage), each
    workload variant's."""
    return max(stage.duration_s for stage in config.load.rate_stages) * len(config.load.variants)


def adaptive_load_s(config: SweepConfig, lives: float, firsts: float) -> float:
    """The seconds of load of `lives` adaptive lives of which `firsts` are K's first lives (load_seconds)."""
    first_s, repeat_s = load_seconds(config)
    firsts = min(firsts, lives)
    return firsts * first_s + (lives - firsts) * repeat_s


def grid_lives(config: SweepConfig) -> tuple[int, int]:
    """(lives, server starts) of the full grid: every K (x every grid value) x load.repeats ("auto": its first 2)."""
    settings = len(config.speculation.k) * max(1, len(config.grid.values))
    lives = settings * config.load.planned_repeats
    return lives, lives if config.load.repeat_mode == "restart" else settings


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def run_cost(costs: list[LifeCost], config: SweepConfig, strategy: str = "grid", stopped_because: str = "",
             lives_range: LivesRange | None = None) -> Cost:
    """`lives_range`: what a verdict like this one costs at best, expected and at worst (price.lives_range), priced
    at a life's mean measured server-seconds; where its lives differ in what they run (LivesRange.seconds: the
    adaptive sweep's repeat runs the target stage alone), each at a start and its stages' share of a whole life's
    measured load."""
    lives, starts = grid_lives(config)
    confirm = [c for c in costs if c.confirm]
    start_each = _mean([c.start_s for c in costs if c.new_server and c.done and c.start_s > 0])
    load_each = _mean([c.measure_s for c in costs if not c.confirm and c.all_stages and c.measure_s > 0])
    if load_each is None:
        load_each = sum(stage.duration_s for stage in config.load.stages)
    grid_s = None if start_each is None else (
        starts * start_each + lives * load_each + sum(c.start_s + c.measure_s for c in confirm))
    here = config.cluster.life_gpus(config.server.extra_args)
    gpu_s = sum((c.start_s + c.measure_s) * (here if c.gpus is None else c.gpus) for c in costs)
    cost = Cost(strategy=strategy, lives=len(costs), starts=sum(c.new_server for c in costs),
                start_s=round(sum(c.start_s for c in costs), 1), measure_s=round(sum(c.measure_s for c in costs), 1),
                grid_lives=lives + len(confirm), grid_server_s=None if grid_s is None else round(grid_s, 1),
                stopped_because=stopped_because, gpu_s=round(gpu_s, 1), wall_s=wall_seconds(costs),
                spread_lives=sum(c.spread and c.done for c in costs))  # a failed one measured nothing
    if lives_range is not None and start_each is not None:
        cost = cost.model_copy(update={"best_lives": lives_range.best, "expected_lives": lives_range.expected,
                                       "worst_lives": lives_range.worst, "life_s": round(start_each + load_each, 1),
                                       "expected_basis": lives_range.basis})
    return cost.model_copy(update={"text": cost_text(cost, _priced_s(lives_range, config, start_each, load_each))})


def _priced_s(lives_range: LivesRange | None, config: SweepConfig, start_each: float | None,
              load_each: float) -> tuple[float, float | None, float] | None:
    """The server-seconds of the range's lives (best, expected, worst) where they differ in what they run: a start
    each, and their stages' seconds (LivesRange.seconds) at the load a whole life measured over the one it planned."""
    if lives_range is None or lives_range.seconds is None or start_each is None:
        return None
    whole_s = load_seconds(config)[0]
    scale = load_each / whole_s if whole_s > 0 else 1.0
    best_s, expected_s, worst_s = lives_range.seconds
    expected = (None if expected_s is None or lives_range.expected is None
                else lives_range.expected * start_each + expected_s * scale)
    return (lives_range.best * start_each + best_s * scale, expected,
            lives_range.worst * start_each + worst_s * scale)


def wall_seconds(costs: list[LifeCost]) -> float | None:
    """The first life's start to the last life's end; None without lives or when one did not record its start."""
    if not costs or any(c.t_start_s is None or c.t_end_s is None for c in costs):
        return None
    return round(max(c.t_end_s for c in costs) - min(c.t_start_s for c in costs), 1)


def minutes(seconds: float) -> str:
    value = seconds / 60
    return f"{value:.1f}" if value < 10 else f"{value:.0f}"


def cost_text(cost: Cost, priced_s: tuple[float, float | None, float] | None = None) -> str:
    """e.g. "5 lives, 2.3 server-minutes (0.4 starting, 1.9 measuring), 2.3 GPU-minutes, 1.4 wall minutes; 1 life
    measured the restart spread; the full grid: 8 lives, ~3.6 server-minutes"; `priced_s`: the server-seconds of the
    lives at best, expected and at worst where they differ in what they run (else each at `cost.life_s`)."""
    spent = cost.start_s + cost.measure_s
    text = (f"{cost.lives} {'life' if cost.lives == 1 else 'lives'}, {minutes(spent)} server-minutes "
            f"({minutes(cost.start_s)} starting, {minutes(cost.measure_s)} measuring)")
    if cost.gpu_s is not None:
        text += f", {minutes(cost.gpu_s)} GPU-minutes"
    if cost.wall_s is not None:
        text += f", {minutes(cost.wall_s)} wall minutes"
    if cost.spread_lives:  # the price of the one fact a server start buys once (issue 38)
        text += f"; {cost.spread_lives} {'life' if cost.spread_lives == 1 else 'lives'} measured the restart spread"
    if cost.strategy == "capacity":  # its probes measure what no grid does: no grid to set it against
        text += "; the capacity search's probes included"
    elif cost.grid_lives != cost.lives or cost.strategy != "grid":
        grid = f"~{minutes(cost.grid_server_s)} server-minutes" if cost.grid_server_s is not None else "its starts unmeasured"
        text += f"; the full grid: {cost.grid_lives} lives, {grid}"
    if cost.best_lives is not None and cost.life_s:
        text += "; a verdict like this one: " + range_text(LivesRange(cost.best_lives, cost.expected_lives,
                                                                      cost.worst_lives or 0, cost.expected_basis),
                                                           cost.life_s, "server-minutes", priced_s)
    return text


def expected_text(config: SweepConfig, adaptive_max_lives: int | None = None,
                  lives_range: LivesRange | None = None) -> str:
    """What the sweep will cost, said before it starts (--dry-run): its server lives and starts, the server-minutes
    of their load (the stages' seconds, each workload variant's), and what the starts may add (their time to ready
    is known only once measured: at most server.ready_timeout_s each). `adaptive_max_lives`: the adaptive sweep's
    cap of lives (adaptive_sweep.default_max_lives); `lives_range`: at best, expected and at worst
    (price.lives_range)."""
    load_s, repeat_s = load_seconds(config)
    lives, starts = grid_lives(config)
    most_lives, most_starts = lives, starts
    settings = len(config.speculation.k) * max(1, len(config.grid.values))
    grid = f" x {len(config.grid.values)} values of {config.grid.axis}" if config.grid.axis else ""
    repeats = config.load.planned_repeats
    shape = f"{len(config.speculation.k)} K{grid} x {repeats} repeat{'s' if repeats > 1 else ''}"
    if adaptive_max_lives is not None:
        lives = starts = most_lives = most_starts = adaptive_max_lives
        head = f"at most {lives} server lives (adaptive: each chosen on what is measured)"
    elif config.load.repeats == "auto":
        most_lives = settings * config.load.max_repeats
        most_starts = most_lives if config.load.repeat_mode == "restart" else settings
        head = (f"{lives} server lives ({shape}), up to {most_lives} (load.repeats = \"auto\": more repeats of a K "
                "the verdict hangs on)")
    else:
        stop = "; the early stop may skip larger K" if len(config.speculation.k) > 1 and not config.grid.axis else ""
        head = f"{lives} server lives ({shape}{stop})"
    up_to = f" (up to {minutes(most_lives * load_s)})" if most_lives != lives else ""
    probes = capacity_probes(config) if adaptive_max_lives is not None else 0
    probes_s = probes * probe_load_s(config) if probes else 0.0
    probe_s = f", a capacity probe {probe_load_s(config):g} s" if probes else ""
    load = (f"{minutes(lives * load_s + probes_s)} server-minutes of load{up_to} ({load_s:g} s of stages a "
            f"life{probe_s})")
    if adaptive_max_lives is not None and repeat_s != load_s:   # a repeat runs the target stage alone
        ks = len(config.speculation.k)
        target = (f"the {config.adaptive_rate:g} req/s stage" if config.adaptive_rate is not None
                  else f"the {config.target_users}-users stage" + (" and the rate stages" if config.load.rate_stages
                                                                    else ""))
        load = (f"at most {minutes(adaptive_load_s(config, lives, ks) + probes_s)} "
                f"server-minutes of load (a K's first life {load_s:g} s of stages, a repeat {repeat_s:g} s: {target} "
                f"alone{probe_s})")
    if probes:
        head += f", and up to {probes} capacity probes beside them"
        starts = most_starts = starts + probes
    text = (f"expected: {head}, {starts} server start{'s' if starts != 1 else ''}: {load} "
            f"plus each start's time to ready (at most "
            f"server.ready_timeout_s = {config.server.ready_timeout_s:g} s: "
            f"{minutes(most_starts * config.server.ready_timeout_s)} server-minutes at worst)")
    if config.sweep.max_server_minutes and adaptive_max_lives is not None:
        text += f"; no life started past sweep.max_server_minutes = {config.sweep.max_server_minutes:g}"
    if lives_range is not None:
        text += f"; {range_text(lives_range, load_s, 'server-minutes of load', lives_range.seconds)}"
    return text


def range_text(r: LivesRange, life_s: float, what: str = "server-minutes",
               seconds: tuple[float, float | None, float] | None = None) -> str:
    """e.g. "at best 3 lives (~6.5 server-minutes), expected 4.7 (~10; at a restart spread of ...), at worst 8
    (~17)"; `life_s`: the server-seconds of one life, `what` the words for them; `seconds`: the seconds of those
    lives (best, expected, worst) where their lives differ (LivesRange.seconds), instead of `life_s` each."""
    best_s, expected_s, worst_s = seconds or (r.best * life_s, None, r.worst * life_s)
    if r.expected is not None and expected_s is None:
        expected_s = r.expected * life_s
    expected = (f"expected {r.expected:g} (~{minutes(expected_s)}; {r.basis})" if r.expected is not None
                else f"the expected number not known ({r.basis})")
    return (f"at best {r.best} {'life' if r.best == 1 else 'lives'} (~{minutes(best_s)} {what}), "
            f"{expected}, at worst {r.worst} (~{minutes(worst_s)})")
