"""The calibration suite (issue 46): for every claim decision.json and the report make, its stated rate against
the rate measured over many independent trials with a known truth. `python -m benchmarks.calibration --help`.

Modules: regimes (the random draw of a trial's conditions, named), lives (synthetic lives with exact truths),
adapters and adapters_findings (the product's calls, one function each), sweeps and rate_trials (the trials),
intervals / findings / verdicts (the claims, by family), tally (stated against measured, met or missed), run (the
CLI).
"""
