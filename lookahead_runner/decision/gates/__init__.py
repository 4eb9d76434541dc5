"""The method's judgment of one stage: its point rules (rules), the gates with intervals and evidence (checks),
one stage judged with its confidence (stage), where more users stop paying (knee)."""
