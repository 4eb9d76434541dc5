"""The Locust scenario side: streaming /v1/completions users, SSE reading, prompts, records and the stage shape.

user, shape, scenario and webui import Locust (which monkey-patches the process with gevent); lag needs
gevent. sse, timeline, request, stages, options, prompt, distributed and live are pure or stdlib-only,
and safe to import anywhere (unit tests included).
"""
