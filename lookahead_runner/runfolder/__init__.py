"""The run folder's contracts: where each file lives (results), plan.json and status.json typed (plan), the raw files -> summary rows and windows (analysis), the client-lag advice they name."""
