"""What the runner side and the Locust scenario both keep to (the lowest floor: imports nothing of ours):
the record schema of requests.csv and stages.csv (records), the load's API key and its header (auth), CPU
lists as taskset writes them (cpus). Loads neither Locust nor the runner's telemetry."""
