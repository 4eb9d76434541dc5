"""Capacity within the SLO per K: where the first SLO of decision.slo leaves its own percentile, in
arrival rate and in users, with intervals (estimate), and the capacity search's choice of the next probe and its
early end above capacity (search)."""
