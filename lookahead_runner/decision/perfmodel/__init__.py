"""The fitted performance model: predict, best K at any users (model); acceptance per draft position
(acceptance); its parts and their fit (fit); held-out trust (trust); what a trusted one adds to a decision
(uses); decision.json's performance_model (summary)."""
