"""The early stop, one rule for both engines: once the method's stop rule (decision/engine.next_setting) fires for
every workload variant, at the largest K any of them stops at, the lives of a larger K still to run are skipped.
Here (runner.run_lives) it is asked after each K's lives; on a Ray cluster (cluster/slots.py) over the K whose
lives, and every smaller K's, have all ended, lives of a larger K already running finish. A life done earlier is kept, never
skipped."""
from __future__ import annotations

from pathlib import Path

from ...config import SweepConfig
from ...decision.engine import next_setting
from ...runfolder import results
from ..life.launch import Life
from ..life.life import skip


def stop_k(config: SweepConfig, data) -> int | None:
    """The K the stop rule fires at over every workload variant (`data`: the run so far, RunData), else None."""
    stops = [next_setting(data.evidence(variant=v.label), config.decision, config.speculation.k)[1]
             for v in config.load.variants]
    return None if None in stops else max(stops)


def skip_beyond(stopped_at: int | None, lives: list[Life], run_dir: Path, tag, say, progress) -> list[Life]:
    """The lives of `lives` of a K above the stop, each written skipped, said and credited; returns them."""
    if stopped_at is None:
        return []
    beyond = [life for life in lives if life.setting.k > stopped_at]
    for life in beyond:
        skip(results.life_dir(run_dir, life.setting.name, life.repeat), stopped_at)
        say(f"{tag(life)}: skipped (early stop at K={stopped_at})")
        progress.life_finished(life.key)
    return beyond
