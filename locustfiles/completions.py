"""The locustfile, for a checkout: `locust -f locustfiles/completions.py --host http://127.0.0.1:8000`.

The users, the load shape and the event handlers live in the package (lookahead_runner/workload/locustfile.py),
so an installed wheel has them too: there, `locust -f "$(lookahead-runner locustfile)"` runs the same.
Options and examples: that file's docstring, and docs/traffic.md.
"""

from locust import run_single_user

from lookahead_runner.workload.locustfile import *  # noqa: F401,F403 - the users and the shape Locust runs
from lookahead_runner.workload.locustfile import StreamingCompletionsUser

if __name__ == "__main__":
    run_single_user(StreamingCompletionsUser)
