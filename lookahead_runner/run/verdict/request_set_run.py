"""decision.json's `request_set` from a run folder: each sweep life's requests and valid windows as read_run read
them (RunData.requests: requests.csv is read once), summarised by decision/traffic/request_set.py (pure). Only for
a sweep with load.requests. And what the run says once about how the file was read (`request_set_note`): its
format, the keys it did not use."""
from __future__ import annotations

import pandas as pd

from ...decision.traffic.request_set import LifeRequests, summarise
from ...decision.traffic.schema import RequestSetSummary
from ...config import SweepConfig
from ...decision.schema import Decision
from ...runfolder.read import BlockRequests, RunData
from ...vllm.probe import SPEC_METRICS_FLAG
from ...workload.request_set import RequestSetError, read_request_set


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
    users = decision.target_users
    cells = data.evidence(config.grid.values[0] if config.grid.values else "", variant.label).at(users) \
        if users is not None else {}
    eligible = {c.k for c in decision.candidates if not c.blocked_by and not c.beyond_stop} \
        if decision.candidates else None
    return summarise(lives, source=path, size=size, fingerprint=fingerprint, categories=categories,
                     natural_output=variant.natural_output, flag_added=flag_added, users=users,
                     decision=config.decision, mix_k=mix_k, baseline_k=decision.baseline_k, eligible=eligible,
                     cells=cells)


def request_set_note(config: SweepConfig) -> str:
    """One line on how load.requests was read: its formats, the keys no format gives a meaning (named, never dropped
    without a word), conversations skipped, own output lengths a fixed load.output_tokens overrides; "" without a
    set (or where it cannot be read any more: the config check refused it before anything started)."""
    if not config.load.requests:
        return ""
    try:
        request_set = read_request_set(config.load.requests)
    except (OSError, UnicodeDecodeError, RequestSetError):
        return ""
    natural = config.load.variants[0].natural_output
    return "Request set " + "; ".join(request_set.notes(None if natural else config.load.output_tokens)) + "."
