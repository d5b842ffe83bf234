import backstop

evidence = {"steps": [{"id": "step-12", "status": "error", "stdout": "API Error: 529 Overloaded"}]}
state = {"now": 1_790_000_000_000, "entropy": 42, "situation": {"step_failed": {"attempt": 1, "evidence": evidence}}}
print(backstop.classify(evidence)["class"], backstop.next_action(state)["action"])  # transient_transport retry
