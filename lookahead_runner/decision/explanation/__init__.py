"""What the decision says: the verdict, its reasons, diagnoses and next runs (reasons), latency differences shown
beside it (tradeoffs), how the sentences write numbers (text)."""
