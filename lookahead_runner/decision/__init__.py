"""The decision engine: evidence (every valid window) in, a typed `Decision` out.

engine.py     the whole decision              schema.py     decision.json (versioned)
ramp.py       the concurrency-scaling check alone
per_variant.py one decision per workload variant
adaptive.py   the adaptive sweep's chooser: which life next, and when to stop
cells/        the evidence (windows, cells), a cell's figures, their intervals
gates/        the method's rules, the gates with intervals, one stage judged, the knee
explanation/  the verdict's reasons, diagnoses and next runs; trade-offs; how numbers are written
confirmation/ the per-batch-size schedule, its boundaries, the confirmation life planned and judged
perfmodel/    the fitted performance model, its held-out trust and its uses
"""
from .engine import decide, evaluate_stages
from .cells.evidence import Cell, Evidence, Window, evidence, window
from .schema import SCHEMA_VERSION, Decision

__all__ = ["SCHEMA_VERSION", "Cell", "Decision", "Evidence", "Window", "decide", "evaluate_stages", "evidence",
           "window"]
