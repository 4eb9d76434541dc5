"""One server life, the trip's middle: what a life is started with (launch.py), its server started in its own
session and stopped whole (server.py, reaper.py the watchdog), on which CPUs (placement.py), checked as found
(server_check.py) and measured by Locust (load.py, probe_watch.py a capacity probe's early end), the sweep's
pre-flight and whose turn it is (preflight.py, preflight_turn.py, lagprobe.py), the package files a life needs
(package_files.py), and the life itself with every status.json it ends in (life.py). Imports no other room of run/."""
