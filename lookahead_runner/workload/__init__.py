"""The Locust scenario side: streaming /v1/completions users, SSE reading, records and the stage shape.

Modules that import Locust (and so gevent's monkey-patching): user, shape, scenario, lag.
Pure modules, safe to import anywhere: sse, timeline, request, stages, options.
"""
