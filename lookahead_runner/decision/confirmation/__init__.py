"""The per-batch-size schedule from the picks (schedule), the users that reach its boundaries (thresholds), and
the confirmation life planned and judged there (confirm)."""
