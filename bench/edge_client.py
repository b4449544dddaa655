#!/usr/bin/env python3
"""Runs inside glassbox's sandbox (through `glassbox trace`): connects and lookups timed one
by one, printed as JSON on stdout. Only loopback and documentation addresses.

    edge_client.py loopback N   N TCP connects to a listener of its own on 127.0.0.1
    edge_client.py edge N       N TCP connects to 192.0.2.1:80 (accepted by glassbox's edge)
    edge_client.py dns N        N lookups of distinct names under bench.example
"""
import json
import socket
import statistics
import sys
import threading
import time


def timed_connects(addr, n):
    times = []
    for _ in range(n):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(5)
        t = time.perf_counter_ns()
        s.connect(addr)
        times.append(time.perf_counter_ns() - t)
        s.close()
    return times


def main():
    what, n = sys.argv[1], int(sys.argv[2])
    if what == "loopback":
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.bind(("127.0.0.1", 0))
        srv.listen(128)

        def accept():
            while True:
                c, _ = srv.accept()
                c.close()

        threading.Thread(target=accept, daemon=True).start()
        times = timed_connects(srv.getsockname(), n)
    elif what == "edge":
        times = timed_connects(("192.0.2.1", 80), n)
    elif what == "dns":
        times = []
        for i in range(n):
            t = time.perf_counter_ns()
            socket.getaddrinfo("n%d.bench.example" % i, 80, socket.AF_INET, socket.SOCK_STREAM)
            times.append(time.perf_counter_ns() - t)
    else:
        sys.exit("usage: edge_client.py loopback|edge|dns N")
    times.sort()
    print(json.dumps({
        "what": what,
        "n": n,
        "median_us": statistics.median(times) / 1000,
        "p90_us": times[int(len(times) * 0.9)] / 1000,
    }))


main()
