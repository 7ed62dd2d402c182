# A tiny web app a test starts in a workspace as its user: static files from the directory given, the headers
# it was sent (/headers), a cookie under the gateway's name and one of its own (/set-cookie), and a WebSocket
# that echoes text (/ws), and an upload (POST) read whole before its answer, the body's length. Python's standard library only (the test image has no Node.js).
import base64
import hashlib
import json
import os
import struct
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

ROOT = sys.argv[2]
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class Handler(SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=ROOT, **kwargs)

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.path == "/headers":
            body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if self.path == "/set-cookie":
            self.send_response(200)
            self.send_header("set-cookie", "ccp_share_intruder=app; Path=/")
            self.send_header("set-cookie", "app_cookie=kept; Path=/")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"ok")
            return
        if self.path == "/ws" and self.headers.get("upgrade", "").lower() == "websocket":
            return self.echo()
        return super().do_GET()

    def do_POST(self):
        remaining = int(self.headers.get("content-length", "0"))
        received = 0
        while remaining > 0:
            chunk = self.rfile.read(min(65536, remaining))
            if not chunk:
                return
            received += len(chunk)
            remaining -= len(chunk)
        body = str(received).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def echo(self):
        key = self.headers["sec-websocket-key"]
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("upgrade", "websocket")
        self.send_header("connection", "Upgrade")
        self.send_header("sec-websocket-accept", accept)
        self.end_headers()
        self.wfile.flush()
        while True:
            head = self.rfile.read(2)
            if len(head) < 2:
                return
            opcode = head[0] & 0x0F
            length = head[1] & 0x7F
            if length == 126:
                length = struct.unpack(">H", self.rfile.read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self.rfile.read(8))[0]
            mask = self.rfile.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(length)))
            if opcode == 8:
                self.wfile.write(b"\x88\x00")
                self.wfile.flush()
                return
            if opcode == 1:
                reply = ("echo: " + data.decode()).encode()
                self.wfile.write(bytes([0x81, len(reply)]) + reply if len(reply) < 126 else b"")
                self.wfile.flush()


os.chdir(ROOT)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
