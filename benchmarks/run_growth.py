"""A real run folder grown on disk to a large sweep's size, for benchmarks/report_render.py: more stages, longer
lives of 1 s samples, more repeats, from a small sweep the product wrote itself.

plan.json changes through the typed Plan and SweepConfig (runfolder/plan.py); each life folder is the seed's life
of the same setting, copied, with its timelines stretched (`stretch_timeline`), its stages re-laid, its requests
drawn from the seed stage's measured ones (`grow_requests`) and its status.json's times moved. Every other file
(server.json, workload.json, the logs) is copied as it is.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lookahead_runner.runfolder.plan import STATUS_FILE, read_plan_and_config, read_status, write_plan
from lookahead_runner.runfolder.results import life_key, write_json
from lookahead_runner.config import SweepConfig

TIME = "t_s"                 # a CSV with this column is a timeline
SAMPLE_S = 1.0               # the grown timelines' sample interval
GAP_S = 60.0                 # between one grown life's end and the next one's start


@dataclass(frozen=True)
class Shape:
    """The grown sweep: settings K (each must be a setting of the seed), stages of 2, 4, 8 ... users over each
    life, repeats per setting, the length of a life, and requests a second per user."""

    ks: list[int]
    stages: int
    repeats: int
    life_s: float
    req_per_user_s: float

    @property
    def users(self) -> list[int]:
        return [2 ** (i + 1) for i in range(self.stages)]  # 2, 4, ... 256: past the batch cap, as a real ramp goes

    @property
    def stage_s(self) -> float:
        return self.life_s / self.stages


def grow(seed_dir: Path, out_dir: Path, shape: Shape) -> Path:
    """A run folder at `out_dir` of `shape`'s size grown from the run folder `seed_dir`."""
    plan, config = read_plan_and_config(seed_dir)
    templates = {life.k: life for life in plan.sweep_lives() if life.repeat == 0}
    missing = sorted(set(shape.ks) - set(templates))
    if missing:
        raise SystemExit(f"{seed_dir}: the seed sweep has no setting K={missing}; sweep them or ask for fewer")
    grown = config.model_dump(mode="json")
    grown["load"] |= {"stages": [{"users": u, "duration_s": shape.stage_s} for u in shape.users],
                      "repeats": shape.repeats}
    grown["speculation"]["k"] = shape.ks
    grown["decision"]["target_users"] = shape.users[len(shape.users) // 2]
    grown_config = SweepConfig.model_validate(grown)
    rng = np.random.default_rng(0)
    start_s = plan_start_s(seed_dir, [templates[k].dir for k in shape.ks])
    base_rate = request_rate(seed_dir / templates[min(templates)].dir)
    lives = []
    for k in shape.ks:
        # each setting keeps its measured speed over the seed's baseline (its req/s ratio), so K still matters
        rate = request_rate(seed_dir / templates[k].dir)
        per_user_s = shape.req_per_user_s * (rate / base_rate if rate and base_rate else 1.0)
        for repeat in range(shape.repeats):
            life = templates[k].model_copy(update={"repeat": repeat, "dir": life_key(templates[k].setting, repeat)})
            t0_s = start_s + len(lives) * (shape.life_s + GAP_S)
            grow_life(seed_dir / templates[k].dir, out_dir / life.dir, shape, t0_s, per_user_s, rng)
            lives.append(life)
    if (seed_dir / "preflight.json").is_file():  # the seed's pre-flight, if it ran one
        shutil.copy2(seed_dir / "preflight.json", out_dir / "preflight.json")
    plan.config, plan.target_users, plan.lives = grown_config.model_dump(mode="json"), grown_config.target_users, lives
    write_plan(out_dir, plan)
    return out_dir


def plan_start_s(seed_dir: Path, life_dirs: list[str]) -> float:
    """The seed's first stage start: the grown lives are laid out one after another from there."""
    return min(float(pd.read_csv(seed_dir / d / "stages.csv")["t_start_s"].min()) for d in life_dirs
               if (seed_dir / d / "stages.csv").is_file())


def request_rate(life_dir: Path) -> float:
    """A seed life's requests a second over its stages (0 for a life that never ran its load)."""
    try:
        stages, requests = pd.read_csv(life_dir / "stages.csv"), pd.read_csv(life_dir / "requests.csv")
    except (OSError, ValueError):
        return 0.0
    return len(requests) / float((stages["t_end_s"] - stages["t_start_s"]).sum())


def grow_life(src: Path, dst: Path, shape: Shape, t0_s: float, req_per_user_s: float,
              rng: np.random.Generator) -> None:
    shutil.copytree(src, dst)
    if not (src / "stages.csv").is_file() or not (src / "requests.csv").is_file():
        return  # a life that failed before its load: copied as it is, as a real sweep would hold it
    seed_stages, seed_requests = pd.read_csv(src / "stages.csv"), pd.read_csv(src / "requests.csv")
    stages = lay_stages(seed_stages, shape, t0_s)
    stages.to_csv(dst / "stages.csv", index=False)
    requests = grow_requests(seed_requests, seed_stages, stages, req_per_user_s, rng)
    requests.to_csv(dst / "requests.csv", index=False)
    scale = rate_scale(seed_requests, seed_stages, requests, stages)
    for path in sorted(src.glob("*.csv")):
        frame = pd.read_csv(path)
        if TIME in frame.columns:
            stretch_timeline(frame, seed_stages, stages, t0_s, shape.life_s, scale).to_csv(dst / path.name,
                                                                                          index=False)
    status = read_status(src)
    if status is not None:
        moved = {"t_s": t0_s + shape.life_s, "measure_s": shape.life_s}
        if status.t_start_s is not None:
            moved["t_start_s"] = t0_s
        write_json(dst / STATUS_FILE, status.model_copy(update=moved).model_dump(mode="json"))


def rate_scale(seed_requests: pd.DataFrame, seed_stages: pd.DataFrame, requests: pd.DataFrame,
               stages: pd.DataFrame) -> np.ndarray:
    """Per grown stage, its request rate over its seed stage's: the server's counters (tokens, requests, drafts)
    rise by as much more or less, so that they agree with the requests the client recorded."""
    def rates(frame: pd.DataFrame, stage_rows: pd.DataFrame) -> np.ndarray:
        counts = frame["stage"].value_counts()
        return np.array([counts.get(row.stage, 0) / (row.t_end_s - row.t_start_s) for row in stage_rows.itertuples()])

    seed, grown = rates(seed_requests, seed_stages), rates(requests, stages)
    of = [seed_stage_of(i, len(stages), len(seed_stages)) for i in range(len(stages))]
    return np.array([grown[i] / seed[j] if seed[j] > 0 else 1.0 for i, j in enumerate(of)])


def seed_stage_of(stage: int, stages: int, seed_stages: int) -> int:
    """The seed stage a grown stage replays: by rank, the first grown stages the seed's first."""
    return min(stage * seed_stages // stages, seed_stages - 1)


def lay_stages(seed_stages: pd.DataFrame, shape: Shape, t0_s: float) -> pd.DataFrame:
    """stages.csv of the grown life: each row its seed stage's, with the new index, users and times."""
    rows = []
    for i, users in enumerate(shape.users):
        row = seed_stages.iloc[seed_stage_of(i, shape.stages, len(seed_stages))].to_dict()
        rows.append(row | {"stage": i, "users": users, "t_start_s": t0_s + i * shape.stage_s,
                           "t_end_s": t0_s + (i + 1) * shape.stage_s})
    return pd.DataFrame(rows, columns=seed_stages.columns)


def grow_requests(requests: pd.DataFrame, seed_stages: pd.DataFrame, stages: pd.DataFrame, req_per_user_s: float,
                  rng: np.random.Generator) -> pd.DataFrame:
    """Each grown stage's requests: a Poisson count of mean users x rate x its length, drawn with replacement from
    its seed stage's measured requests and sent evenly over it (every t_*_s stamp of a request moves with its
    send)."""
    stamps = [c for c in requests.columns if c.startswith("t_") and c.endswith("_s")]
    parts = []
    for stage in stages.itertuples():
        seed = seed_stages.iloc[seed_stage_of(int(stage.stage), len(stages), len(seed_stages))]
        pool = requests[requests["stage"] == seed["stage"]]
        pool = pool if not pool.empty else requests
        length = float(stage.t_end_s - stage.t_start_s)
        n = max(1, int(rng.poisson(int(stage.users) * req_per_user_s * length)))
        drawn = pool.iloc[rng.integers(0, len(pool), n)].reset_index(drop=True)
        shift = stage.t_start_s + (np.arange(n) + rng.uniform(0, 1, n)) * length / n - drawn["t_send_s"]
        for column in stamps:
            drawn[column] = drawn[column] + shift
        drawn["stage"], drawn["users"] = int(stage.stage), int(stage.users)
        parts.append(drawn)
    return pd.concat(parts, ignore_index=True).sort_values("t_done_s" if "t_done_s" in stamps else "t_send_s",
                                                           kind="stable")


def stretch_timeline(frame: pd.DataFrame, seed_stages: pd.DataFrame, stages: pd.DataFrame, t0_s: float,
                     life_s: float, scale: np.ndarray | None = None) -> pd.DataFrame:
    """A timeline (rows stamped t_s) over the grown life, one sample a second: each grown stage replays its seed
    stage's samples in a loop. A column named *_total is a counter: it keeps rising at its measured rate, times
    the grown stage's `scale` (rate_scale; 1 without); any other column is a gauge, read at the matching seed
    sample. A timeline with several rows per stamp (one per spec position) is stretched per its non-counter
    columns' values."""
    t = t0_s + np.arange(0.0, life_s, SAMPLE_S)
    stage = np.minimum(((t - t0_s) // (life_s / len(stages))).astype(int), len(stages) - 1)
    seed = np.array([seed_stage_of(i, len(stages), len(seed_stages)) for i in stage])
    seed_start = seed_stages["t_start_s"].to_numpy(float)[seed]
    seed_len = (seed_stages["t_end_s"] - seed_stages["t_start_s"]).to_numpy(float)[seed]
    offset = t - stages["t_start_s"].to_numpy(float)[stage]
    seed_t = seed_start + np.mod(offset, seed_len)
    counters = [c for c in frame.columns if c.endswith("_total")]
    keys = [] if frame[TIME].is_unique else [c for c in frame.columns if c != TIME and c not in counters]
    groups = frame.groupby(keys, sort=True) if keys else [((), frame)]
    parts = []
    for _, series in groups:
        series = series.sort_values(TIME)
        times = series[TIME].to_numpy(float)
        at = np.clip(np.searchsorted(times, seed_t, side="right") - 1, 0, len(series) - 1)
        grown = series.iloc[at].reset_index(drop=True)
        grown[TIME] = t
        for column in counters:
            grown[column] = _counter(times, series[column].to_numpy(float), seed_t, seed_start, seed_len,
                                     np.ones(len(stages))[stage] if scale is None else scale[stage])
        parts.append(grown)
    return pd.concat(parts, ignore_index=True).sort_values(TIME, kind="stable")[list(frame.columns)]


def _counter(times: np.ndarray, values: np.ndarray, seed_t: np.ndarray, seed_start: np.ndarray,
             seed_len: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """A counter read at `seed_t` (seed times, looping over each seed stage from `seed_start` for `seed_len`)
    made to rise as the seed's did over each next second, times `scale`; a second that runs past its seed stage's
    end goes on from the stage's start, as the loop does (seed stages last longer than a sample)."""
    known = ~np.isnan(values)
    if known.sum() < 2:
        return np.full(len(seed_t), values[known][0] if known.any() else np.nan)

    def at(when: np.ndarray) -> np.ndarray:
        return np.interp(when, times[known], values[known])

    end, after = seed_start + seed_len, seed_t + SAMPLE_S
    wrapped = np.where(after > end, at(seed_start + np.maximum(after - end, 0)) - at(seed_start), 0.0)
    steps = np.clip(at(np.minimum(after, end)) - at(seed_t) + wrapped, 0, None) * scale
    return at(seed_t[:1]) + np.concatenate([[0.0], np.cumsum(steps[:-1])])
