"""The `backstop serve` client example of README.md, run by host-test/tests/serve.rs
(which puts the `backstop` binary on PATH and checks what this prints)."""
# README example begins
import itertools, json, subprocess

server = subprocess.Popen(["backstop", "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
ids = itertools.count(1)

def call(function, input=None):
    server.stdin.write(json.dumps({"id": next(ids), "function": function, "input": input}) + "\n")
    server.stdin.flush()
    response = json.loads(server.stdout.readline())
    if "error" in response:
        raise RuntimeError(f"{response['error']['kind']}: {response['error']['message']}")
    return response["ok"]

evidence = {"text": "API Error: 529 Overloaded", "exit_code": 1}
c = call("classify", evidence)
print(c["class"], c["signal"])  # transient_transport api error: 529
failure = {"attempt": 1, "waited": 0, "evidence": evidence}
state = {"now": 1790000000000, "entropy": 7, "situation": {"step_failed": failure}}
print(call("next-action", state)["action"])  # retry
# README example ends
