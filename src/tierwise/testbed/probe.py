"""Small measurements run inside the namespaces (``python -m tierwise.testbed.probe MODE ...``).

* ``stream-recv HOST PORT BYTES`` / ``stream-send HOST PORT BYTES``: one TCP stream of ``BYTES``; the receiver
  prints the rate from its first byte to its last (bytes/s), the sender waits for the receiver's ack;
* ``pong HOST PORT N`` / ``ping HOST PORT N``: N one-byte round trips with TCP_NODELAY; the client prints the
  median round trip (s); a collective's step pays a one-way trip, RTT / 2;
* ``incast-recv HOST PORT BYTES SENDERS`` / ``incast-send HOST PORT BYTES``: a many-to-one (issue 34): the
  receiver accepts SENDERS connections, starts them together and prints the seconds from its first byte to
  its last (every sender's BYTES in); the flow-level model says ``SENDERS x BYTES / C`` (netsim/incast.py);
* ``memcopy BYTES``: the median of 5 ``numpy.copyto`` of a BYTES buffer, printed as read+write bytes/s
  (the rate of the copies torch and gloo make outside their algorithms, :mod:`tierwise.collectives.fitted`).

Every mode prints one number on stdout and exits 0, so the caller reads it without parsing prose.
"""

from __future__ import annotations

import socket
import statistics
import sys
import time

_CHUNK = 1 << 20


def _listen(host: str, port: int) -> socket.socket:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(1)
    srv.settimeout(30)
    conn, _ = srv.accept()
    srv.close()
    conn.settimeout(60)
    return conn


def _connect(host: str, port: int) -> socket.socket:
    deadline = time.monotonic() + 30
    while True:
        try:
            return socket.create_connection((host, port), timeout=60)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def stream_recv(host: str, port: int, nbytes: int) -> float:
    conn = _listen(host, port)
    buf = bytearray(_CHUNK)
    got, start = 0, None
    while got < nbytes:
        k = conn.recv_into(buf)
        if k == 0:
            raise SystemExit("stream ended early")
        if start is None:
            start = time.perf_counter()
            got += k
            first = k
            continue
        got += k
    elapsed = time.perf_counter() - start
    conn.sendall(b"k")
    conn.close()
    return (got - first) / elapsed


def _send_and_wait(conn: socket.socket, nbytes: int) -> None:
    """Send ``nbytes`` of zeros in ``_CHUNK`` pieces, then wait for the receiver's one-byte acknowledgement."""
    data = bytes(_CHUNK)
    sent = 0
    while sent < nbytes:
        k = min(_CHUNK, nbytes - sent)
        conn.sendall(data[:k])
        sent += k
    conn.recv(1)
    conn.close()


def stream_send(host: str, port: int, nbytes: int) -> float:
    conn = _connect(host, port)
    start = time.perf_counter()
    _send_and_wait(conn, nbytes)
    return nbytes / (time.perf_counter() - start)


def pong(host: str, port: int, count: int) -> float:
    conn = _listen(host, port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(count):
        conn.sendall(conn.recv(1))
    conn.close()
    return 0.0


def ping(host: str, port: int, count: int) -> float:
    conn = _connect(host, port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(count):
        t0 = time.perf_counter()
        conn.sendall(b"p")
        conn.recv(1)
        rtts.append(time.perf_counter() - t0)
    conn.close()
    return statistics.median(rtts)


def incast_recv(host: str, port: int, nbytes: int, senders: int) -> float:
    """Seconds from the first byte to the last of ``senders`` streams of ``nbytes`` received at once."""
    import selectors

    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((host, port))
    srv.listen(senders)
    srv.settimeout(30)
    conns = [srv.accept()[0] for _ in range(senders)]
    srv.close()
    sel = selectors.DefaultSelector()
    left = {}
    for c in conns:
        c.setblocking(False)
        sel.register(c, selectors.EVENT_READ)
        left[c] = nbytes
    for c in conns:  # every sender connected: start them together
        c.sendall(b"g")
    buf = bytearray(_CHUNK)
    start = last = None
    while left:
        for key, _ in sel.select(timeout=60):
            k = key.fileobj.recv_into(buf)
            if k == 0:
                raise SystemExit("stream ended early")
            last = time.perf_counter()
            start = last if start is None else start
            left[key.fileobj] -= k
            if left[key.fileobj] <= 0:
                sel.unregister(key.fileobj)
                del left[key.fileobj]
    for c in conns:
        c.setblocking(True)
        c.sendall(b"k")
        c.close()
    return last - start


def incast_send(host: str, port: int, nbytes: int) -> float:
    conn = _connect(host, port)
    conn.recv(1)  # the receiver's start signal: every sender begins together
    _send_and_wait(conn, nbytes)
    return 0.0


def memcopy(nbytes: int) -> float:
    import numpy as np

    src = np.ones(nbytes // 8)
    dst = np.empty_like(src)
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        times.append(time.perf_counter() - t0)
    return 2.0 * src.nbytes / statistics.median(times)


def main(argv: list[str]) -> None:
    mode, *args = argv
    if mode == "memcopy":
        print(repr(memcopy(int(args[0]))))
        return
    host, port, n = args[0], int(args[1]), int(args[2])
    if mode == "incast-recv":
        print(repr(incast_recv(host, port, n, int(args[3]))))
        return
    fn = {"stream-recv": stream_recv, "stream-send": stream_send, "pong": pong, "ping": ping,
          "incast-send": incast_send}[mode]
    print(repr(fn(host, port, n)))


if __name__ == "__main__":
    main(sys.argv[1:])
