"""A stand-in inference server for launcher tests: health endpoints, a child process, optional misbehaviour.

usage: fake_server.py --port P [--pid-file F] [--ignore-sigterm] [--crash-after S] [--never-healthy]
"""

import argparse
import json
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
parser.add_argument("--host", default="127.0.0.1")
parser.add_argument("--pid-file")
parser.add_argument("--ignore-sigterm", action="store_true")
parser.add_argument("--crash-after", type=float, default=None)
parser.add_argument("--never-healthy", action="store_true")
parser.add_argument("--version", action="store_true")
args, _ = parser.parse_known_args()

if args.version:
    print("fake-server 1.2.3")
    sys.exit(0)
if args.crash_after is not None:
    time.sleep(args.crash_after)
    print("RuntimeError: CUDA out of memory. Tried to allocate 20.00 GiB", flush=True)
    sys.exit(3)
if args.ignore_sigterm:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
# A grandchild, like vLLM's engine-core process: it must die with the server.
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
if args.pid_file:
    with open(args.pid_file, "w") as fh:
        json.dump({"server": __import__("os").getpid(), "child": child.pid}, fh)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if args.never_healthy and self.path == "/health":
            self.send_response(503)
            self.end_headers()
            return
        body = {"/health": {"status": "ok"}, "/v1/models": {"data": [{"id": "fake-model"}]}}.get(self.path)
        self.send_response(200 if body else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(json.dumps(body or {}).encode())

    def log_message(self, *a):
        pass


print("fake server listening", flush=True)
ThreadingHTTPServer((args.host, args.port), Handler).serve_forever()
