"""The user's traffic in the decision: acceptance per request and per category of a request set (issue 28)."""
