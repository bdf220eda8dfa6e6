#!/usr/bin/python3
"""s3fault.py - an HTTP proxy in front of the test's S3 gateway that
fails requests on purpose, and logs every request it passes.

    s3fault.py UPSTREAM PORTFILE LOG FAULTS

UPSTREAM is the gateway (http://127.0.0.1:PORT). The proxy listens on a
loopback port the kernel picks and writes it to PORTFILE. Each request is
forwarded with its headers unchanged (the Host header included, so the
gateway checks the signature the client made for the proxy's address),
and logged to LOG as "METHOD PATH STATUS BYTES".

FAULTS is a file read before each request; each line is "KIND COUNT
[MATCH]": the next COUNT requests whose path contains MATCH (any, if
none) get the fault, the request being "METHOD PATH", or "METHOD PATH
RANGE" with a Range header's value (bytes=A-B), and the line's count
goes down as they do. Kinds:
  503    a 503 SlowDown error, as S3 sends when throttling
  500    a 500 InternalError
  reset  the connection closed with no response
  short  the response's headers with the full Content-Length, half of
         the body, then the connection closed
  etag   the request is passed on, but the response's ETag is replaced
         (a store whose object changed between two requests)
  slow   the body sent 16 KiB at a time, 50 ms apart (a slow link)
  flip   the body with its byte a quarter of the way in changed (a
         store or link that damages what it sends)
  norange  a ranged GET answered 200 without Content-Range, as a store
         that ignores Range answers (the request keeps its Range: it
         is signed)
"""
import http.client
import http.server
import os
import socket
import socketserver
import sys
import threading
import time
import urllib.parse

UP = urllib.parse.urlsplit(sys.argv[1])
PORTFILE, LOG, FAULTS = sys.argv[2], sys.argv[3], sys.argv[4]
LOCK = threading.Lock()


def take_fault(request):
    """The fault for this request, if any, counted off FAULTS."""
    with LOCK:
        try:
            with open(FAULTS) as f:
                lines = [l.split() for l in f if l.strip()]
        except FileNotFoundError:
            return None
        got = None
        for l in lines:
            kind, count = l[0], int(l[1])
            match = " ".join(l[2:])
            if got is None and count > 0 and match in request:
                got = kind
                l[1] = str(count - 1)
        if got:
            tmp = FAULTS + ".tmp"
            with open(tmp, "w") as f:
                for l in lines:
                    f.write(" ".join(l) + "\n")
            os.replace(tmp, FAULTS)
        return got


def log(line):
    with LOCK:
        with open(LOG, "a") as f:
            f.write(line + "\n")


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def error(self, status, code):
        body = ("<?xml version=\"1.0\"?><Error><Code>%s</Code>"
                "<Message>injected</Message></Error>" % code).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        log("%s %s %d %d" % (self.command, self.path, status, 0))

    def relay(self):
        length = int(self.headers.get("Content-Length", 0) or 0)
        body = self.rfile.read(length) if length else None
        request = self.command + " " + self.path
        if self.headers.get("Range"):
            request += " " + self.headers.get("Range")
        fault = take_fault(request)
        if fault == "reset":
            log("%s %s reset 0" % (self.command, self.path))
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        if fault == "503":
            return self.error(503, "SlowDown")
        if fault == "500":
            return self.error(500, "InternalError")
        conn = http.client.HTTPConnection(UP.hostname, UP.port, timeout=60)
        headers = {k: v for k, v in self.headers.items()}
        conn.request(self.command, self.path, body=body, headers=headers)
        r = conn.getresponse()
        data = r.read() if self.command != "HEAD" else b""
        if fault == "flip" and data:
            data = bytearray(data)
            data[len(data) // 4] ^= 0x55
            data = bytes(data)
        status, reason = r.status, r.reason
        if fault == "norange" and status == 206:
            status, reason = 200, "OK"
        self.send_response(status, reason)
        for k, v in r.getheaders():
            if k.lower() in ("transfer-encoding", "connection"):
                continue
            if k.lower() == "content-range" and fault == "norange":
                continue
            if k.lower() == "etag" and fault == "etag":
                v = '"00000000000000000000000000000000"'
            if k.lower() == "content-length" and self.command != "HEAD":
                v = str(len(data))
            self.send_header(k, v)
        if self.command != "HEAD" and r.getheader("Content-Length") is None:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "short" and len(data) > 1:
            self.wfile.write(data[:len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            log("%s %s short %d" % (self.command, self.path, len(data) // 2))
            conn.close()
            return
        if fault == "slow":
            for i in range(0, len(data), 16384):
                self.wfile.write(data[i:i + 16384])
                self.wfile.flush()
                time.sleep(0.05)
        elif data:
            self.wfile.write(data)
        log("%s %s %d %d" % (self.command, self.path, status, len(data)))
        conn.close()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = relay


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", 0), Proxy)
with open(PORTFILE + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.replace(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
