#!/usr/bin/env python3
"""Drive Keel from Python with the standard library only.

Starts `keel serve --stdio`, opens a session with one client-side tool (get_weather, run here
in Python), sends a prompt and prints the answer. The protocol is in docs/protocol.md.

    python3 examples/weather.py                     # the scripted model (no API key)
    KEEL_PROVIDER=openai-compatible python3 examples/weather.py   # a real model: OPENAI_API_KEY,
        # or OPENAI_BASE_URL (+ KEEL_MODEL, KEEL_CONTEXT_WINDOW) for a local server
    KEEL_SERVE="keel serve --stdio" python3 examples/weather.py

A server that cannot start (no key) or a turn that does not complete ends the script with one
line saying why and exit code 1, never a traceback.
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


class KeelError(Exception):
    """The server went away or refused a request: the message says why."""


class Keel:
    def __init__(self, command):
        try:
            self.proc = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8"
            )
        except OSError as error:
            raise KeelError(f"cannot start {command[0]}: {error}") from error
        self.next_id = 0
        hello = self.read()
        if hello.get("type") != "hello" or not hello.get("protocol", "").startswith("1."):
            raise KeelError(f"not a Keel 1.x server: {hello}")
        self.write({"type": "hello", "protocol": "1.0", "client": {"name": "weather.py"}})

    def write(self, frame):
        self.proc.stdin.write(json.dumps(frame) + "\n")
        self.proc.stdin.flush()

    def read(self):
        line = self.proc.stdout.readline()
        if not line:
            # The server said why on stderr (e.g. which key to set); add its exit code.
            code = self.proc.wait(timeout=30)
            raise KeelError(f"the Keel server exited (code {code}) before answering")
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
                    raise KeelError(f"{type_} failed: {frame['code']}: {frame['message']}")
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
    try:
        keel = Keel(server_command())
    except KeelError as error:
        print(f"weather.py: {error}", file=sys.stderr)
        return 1
    try:
        session = keel.request("session.open", tools=[WEATHER_TOOL])["sessionId"]
        turn = keel.request("prompt", sessionId=session, text="What is the weather in Lisbon?")
    except KeelError as error:
        print(f"weather.py: {error}", file=sys.stderr)
        keel.close()
        return 1
    if turn["status"] != "completed":
        # A failed turn (a wrong key, an unreachable server, a refused tool) says why.
        print(f"weather.py: the turn ended {turn['status']}: {turn.get('reason', 'no reason given')}",
              file=sys.stderr)
        keel.close()
        return 1
    print(turn.get("text") or "(the model gave no text)")
    return 0 if keel.close() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
