"""The Locust scenario side: streaming /v1/completions users, SSE reading, prompts, records and the stage shape.

user, shape and scenario import Locust (which monkey-patches the process with gevent); lag needs gevent.
sse, timeline, request, stages, options, prompt and distributed are pure or stdlib-only, and safe to
import anywhere (unit tests included). Nothing here imports the runner side, nor the live dashboard
(lookahead_runner.live) that the locustfile adds beside it; contracts/records.py (the record schema) and
contracts/auth.py (the API key's variable and header) are what it shares with the runner.
"""
