#!/usr/bin/env python3
"""Drive Keel from Python with the standard library only.

Starts `keel serve --stdio`, opens a session with one client-side tool (get_weather, run here
in Python), sends a prompt and prints the answer. The protocol is in docs/protocol.md.

    python3 examples/weather.py                     # the scripted model (no API key)
    KEEL_PROVIDER=openai python3 examples/weather.py  # a real model (OPENAI_API_KEY)
    KEEL_SERVE="keel serve --stdio" python3 examples/weather.py
"""
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def server_command():
    if os.environ.get("KEEL_SERVE"):
        return shlex.split(os.environ["KEEL_SERVE"])
    command = ["node", os.path.join(ROOT, "cli", "bin.js"), "serve", "--stdio", "--store", "memory"]
    if os.environ.get("KEEL_PROVIDER", "scripted") == "scripted":
        command += ["--provider", "scripted", "--script", os.path.join(HERE, "weather.script.json")]
    return command


def get_weather(args):
    """The client-side tool: Keel validated args against the schema before sending them."""
    return f"{args['city']}: sunny, 24 °C"


WEATHER_TOOL = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
    "traits": {"risk": "low", "readOnly": True},
}


class Keel:
    def __init__(self, command):
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
        )
        self.next_id = 0
        hello = self.read()
        if hello.get("type") != "hello" or not hello.get("protocol", "").startswith("1."):
            raise RuntimeError(f"not a Keel 1.x server: {hello}")
        self.write({"type": "hello", "protocol": "1.0", "client": {"name": "weather.py"}})

    def write(self, frame):
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the Keel server closed the connection")
        return json.loads(line)

    def request(self, type_, **params):
        """Sends a request and serves control requests until its response arrives."""
        self.next_id += 1
        request_id = self.next_id
        self.write({"type": type_, "id": request_id, **params})
        while True:
            frame = self.read()
            kind = frame["type"]
            if kind in ("ok", "error") and frame.get("id") == request_id:
                if kind == "error":
                    raise RuntimeError(f"{type_} failed: {frame['code']}: {frame['message']}")
                return frame["result"]
            if kind == "tool.execute":
                try:
                    result = get_weather(frame["args"])
                    print(f"[{frame['tool']}] {json.dumps(frame['args'])} -> {result}")
                    self.write({"type": "ok", "id": frame["id"], "result": result})
                except Exception as error:  # the model gets the message as the tool's error
                    self.write({"type": "ok", "id": frame["id"],
                                "result": {"ok": False, "message": str(error)}})
            elif kind == "permission.request":
                self.write({"type": "ok", "id": frame["id"], "result": {"type": "allow_once"}})
            elif kind == "error":
                print(f"keel: {frame['code']}: {frame['message']}", file=sys.stderr)
            # events, cancel and goodbye frames are not needed here

    def close(self):
        self.proc.stdin.close()  # the server settles, flushes and exits 0
        return self.proc.wait(timeout=30)


def main():
    keel = Keel(server_command())
    session = keel.request("session.open", tools=[WEATHER_TOOL])["sessionId"]
    turn = keel.request("prompt", sessionId=session, text="What is the weather in Lisbon?")
    messages = keel.request("messages", sessionId=session)["messages"]
    answer = next(m["content"] for m in reversed(messages) if m["role"] == "assistant")
    print(answer)
    code = keel.close()
    return 0 if turn["status"] == "completed" and code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
