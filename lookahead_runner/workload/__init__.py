"""The Locust scenario side: streaming /v1/completions users, SSE reading, records and the stage shape.

user, shape and scenario import Locust (which monkey-patches the process with gevent); lag needs gevent.
sse, timeline, request, stages and options are pure and safe to import anywhere (unit tests included).
"""
