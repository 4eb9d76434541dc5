"""decision.json's `request_set` from a run folder: each sweep life's requests and valid windows as read_run read
them (RunData.requests: requests.csv is read once), summarised by decision/traffic/request_set.py (pure). Only for
a sweep with load.requests."""
from __future__ import annotations

import pandas as pd

from ..decision.traffic.request_set import LifeRequests, summarise
from ..decision.traffic.schema import RequestSetSummary
from ..decision.schema import Decision
from ..runfolder.read import BlockRequests, RunData
from ..vllm.probe import SPEC_METRICS_FLAG
from ..workload.request_set import RequestSetError, read_request_set


def request_set_summary(data: RunData, decision: Decision) -> RequestSetSummary | None:
    """None without a request set."""
    config = data.config
    path = config.load.requests
    if not path or data.run_dir is None:
        return None
    variant = config.load.variants[0]
    lives = []
    for life in data.lives:
        planned = life.planned
        if planned.confirms or planned.axis_value != (config.grid.values[0] if config.grid.values else "") \
                or life.state != "done":
            continue
        block = data.requests.get((planned.dir, variant.key)) or BlockRequests(pd.DataFrame())
        lives.append(LifeRequests(planned.k, planned.repeat, block.requests, block.windows))
    try:
        request_set = read_request_set(path)
        size, fingerprint, categories = len(request_set), request_set.fingerprint, request_set.categories
    except (OSError, UnicodeDecodeError, RequestSetError):  # moved since the run: what the rows say is still true
        size, fingerprint, categories = 0, "", {}
    mix_k = decision.recommended.k if decision.recommended else decision.leading_k
    flag_added = any(SPEC_METRICS_FLAG in life.argv for life in data.plan.lives)
    return summarise(lives, source=path, size=size, fingerprint=fingerprint, categories=categories,
                     natural_output=variant.natural_output, flag_added=flag_added, users=decision.target_users,
                     objective=config.decision.objective, mix_k=mix_k)
