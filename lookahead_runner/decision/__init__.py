"""The decision engine: evidence (every valid window) in, a typed `Decision` out.

evidence.py  windows and cells, the typed input      stats.py     intervals (numpy/scipy)
measure.py   figures of a cell, as measured and resampled
rules.py     the method's point rules (gates, stop rule, pick)
checks.py    gates with intervals and evidence         stage.py     one stage judged, with its confidence
knee.py      where more users stop paying               tradeoffs.py latency differences shown beside it
explain.py   verdict, reasons, diagnoses, next runs     engine.py    the whole decision
schema.py    decision.json (versioned)                  schedule.py  per-batch-size ranges from the picks
confirm.py   the confirmation life planned and judged   thresholds.py the users that reach a schedule boundary
ramp.py      the concurrency-scaling check alone        variants.py  one decision per workload variant
text.py      how the sentences write numbers
perfmodel.py the fitted performance model (predict, best K at any users): perfmodel_acceptance.py,
             perfmodel_fit.py (its parts), perfmodel_check.py (held-out trust), perfmodel_uses.py (what a
             trusted one adds to a decision), perfmodel_schema.py (decision.json's performance_model)
"""
from .engine import decide, evaluate_stages
from .evidence import Cell, Evidence, Window, evidence, window
from .schema import SCHEMA_VERSION, Decision

__all__ = ["SCHEMA_VERSION", "Cell", "Decision", "Evidence", "Window", "decide", "evaluate_stages", "evidence",
           "window"]
