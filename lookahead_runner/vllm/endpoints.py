"""The paths the runner reaches a vLLM server on (the Locust scenario, which imports none of this package's
runner side, names its own: workload/user.py, and /v1/models in workload/scenario.py)."""
HEALTH_PATH = "/health"            # 200 once the engine is up
METRICS_PATH = "/metrics"          # Prometheus text (vllm/metrics.py names the series)
COMPLETIONS_PATH = "/v1/completions"
CHAT_PATH = "/v1/chat/completions"     # load.endpoint = "chat"
MODELS_PATH = "/v1/models"         # the served models, the default one first (run/life/server_check.py)
