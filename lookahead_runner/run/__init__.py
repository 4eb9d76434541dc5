"""The runner side: the sweep loop, each server life, Locust, placement and the pre-flight, resume and the watchdog, and finalize (the run folder's files -> summary, decision, report)."""
