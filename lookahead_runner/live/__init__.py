"""The live dashboard: "vLLM live" and "vLLM history" tabs in Locust's web UI, with charts, CSV downloads.

It runs inside the Locust process that serves the web UI, beside the scenario (lookahead_runner.workload)
and apart from it: the scenario never imports this package, and the runner never imports either.
values, tables and charts are pure (no Locust, no gevent) and safe to import anywhere; webui wires
them into Locust (it imports Locust, which monkey-patches the process with gevent); static/ holds
the script that draws the charts in the browser.
"""
