"""The trip's end, from the run folder's files alone: summary.csv after each K, then decision.json and
report.html (finalize.py, its steps timed in steps.py), with the verdict at the target rate (rate_verdict.py), the
performance model's inputs and fit (perfmodel_run.py) and the request set's figures (request_set_run.py). A sweep
asks it mid-way too (the tables, the model); it imports no other room of run/."""
