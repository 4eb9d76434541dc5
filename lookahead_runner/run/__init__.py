"""The runner side, in rooms along the trip: one server life (life/: the server, Locust, placement and the
pre-flight, the watchdog), the run folder's files to the verdict (verdict/: finalize's tables, decision and report),
which lives a sweep runs and when it stops (strategies/), the Ray engine (cluster/); at this top, the sweep's
driver (runner.py), what it refuses before the first life (before_lives.py) and its progress display (progress.py).
A room imports only the rooms below it (tests/unit/test_package_boundaries.py, RUN_FLOORS)."""
