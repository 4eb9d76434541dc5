"""The run folder's contracts: where each file lives (results), plan.json and status.json typed (plan),
preflight.json and the placement record typed (preflight), what a verdict cost (cost), the raw files -> summary
rows and windows (analysis), the client-lag advice they name (lag_advice)."""
