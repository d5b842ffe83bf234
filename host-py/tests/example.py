import backstop

evidence = {
    "steps": [
        {"id": "workflow-design", "status": "completed"},
        {
            "id": "step-12-run-precommit",
            "status": "error",
            "error": "agent step failed: amplihack claude failed (exit 1)",
            "stdout": "API Error: 529 Overloaded. This is a server-side issue, "
                      "usually temporary — try again in a moment.",
        },
    ],
}
c = backstop.classify(evidence)
print(c["class"], c["signal"])  # transient_transport api error: 529
