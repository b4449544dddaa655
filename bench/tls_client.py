#!/usr/bin/env python3
"""Runs inside glassbox's sandbox (through `glassbox trace`): HTTPS requests timed one by one,
printed as JSON on stdout. Only loopback and names under .test.

    tls_client.py edge N        N HTTPS GETs to https://bench.test/ through glassbox's edge
                                (TLS terminated with the run's CA, which the sandbox trusts),
                                a new connection each (handshake + request + answer)
    tls_client.py edge-keep N   the same on one kept-alive connection (request + answer)
    tls_client.py local N       the same against a TLS server of its own on 127.0.0.1 (another
                                process, a certificate made here with openssl), no edge
    tls_client.py local-keep N  the same on one kept-alive connection
"""
import http.client
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

SERVER = r"""
import http.server, ssl, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_GET(self):
        # One write, as the edge answers: no Nagle and delayed-ACK stall between two.
        self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 2\r\n\r\n{}")
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"""


def local_server(tmp):
    """A TLS server on loopback with a fresh ECDSA P-256 certificate for 127.0.0.1 (the same
    kind of key the edge's leaves have); its port, its process and a client context trusting it."""
    key, cert = os.path.join(tmp, "key.pem"), os.path.join(tmp, "cert.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    p = subprocess.Popen([sys.executable, "-c", SERVER, cert, key], stdout=subprocess.PIPE)
    port = int(p.stdout.readline())
    return port, p, ssl.create_default_context(cafile=cert)


def timed(connect, n, keep):
    times = []
    conn = connect() if keep else None
    for _ in range(n):
        t = time.perf_counter_ns()
        c = conn or connect()
        c.request("GET", "/v1/ping", headers={"Accept": "application/json"})
        r = c.getresponse()
        r.read()
        if not keep:
            c.close()
        times.append(time.perf_counter_ns() - t)
    if conn:
        conn.close()
    return times


def main():
    what, n = sys.argv[1], int(sys.argv[2])
    keep = what.endswith("-keep")
    proc = None
    if what.startswith("edge"):
        ctx = ssl.create_default_context()
        connect = lambda: http.client.HTTPSConnection("bench.test", 443, timeout=10, context=ctx)
    else:
        tmp = tempfile.mkdtemp()
        port, proc, ctx = local_server(tmp)
        connect = lambda: http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)
    try:
        times = timed(connect, n, keep)
    finally:
        if proc:
            proc.kill()
    us = sorted(t / 1000 for t in times)
    print(json.dumps({"n": n, "median_us": statistics.median(us), "p90_us": us[int(len(us) * 0.9)]}))


main()
