"""Capacity within the SLO per K: where each K's attainment of every SLO leaves decision.slo_attainment, in
arrival rate and in users, with intervals (estimate), and the capacity search's choice of the next probe and its
early end above capacity (search)."""
