"""A load balancer's data path, run by the harness in the network namespace of the
emulated node that owns the load balancer address (harness/wan.py): for each
`LISTEN_IP:PORT=BACKEND_IP:PORT` argument it accepts TCP connections on the first and
relays each, byte for byte in both directions, to the second, from the listening
address (the backend sees the load balancer's address, as NetworkPolicies then judge
it). It never looks inside (TLS passes through end to end, as with a TCP load balancer
or TLS passthrough).

Prints `ready` once every listener is bound; logs one line per connection to stderr.
Only the standard library: it runs under whichever Python starts it.
"""

import contextlib
import socket
import sys
import threading
import time


def _log(text):
    sys.stderr.write(f"{time.strftime('%H:%M:%S')} {text}\n")
    sys.stderr.flush()


def _pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)  # pass the half-close on


def _relay(client, peer, backend, source):
    try:
        upstream = socket.create_connection(backend, timeout=5, source_address=(source, 0))
    except OSError as exc:
        _log(f"{peer[0]}:{peer[1]} -> {backend[0]}:{backend[1]} refused: {exc}")
        client.close()
        return
    upstream.settimeout(None)
    _log(f"{peer[0]}:{peer[1]} -> {backend[0]}:{backend[1]}")
    back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
    back.start()
    _pipe(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _serve(listener, backend):
    source = listener.getsockname()[0]
    while True:
        client, peer = listener.accept()
        threading.Thread(target=_relay, args=(client, peer, backend, source), daemon=True).start()


def _address(text):
    host, port = text.rsplit(":", 1)
    return host, int(port)


def main():
    listeners = []
    for arg in sys.argv[1:]:
        listen, backend = arg.split("=")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(_address(listen))
        sock.listen(64)
        listeners.append((sock, _address(backend)))
    for sock, backend in listeners:
        threading.Thread(target=_serve, args=(sock, backend), daemon=True).start()
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    threading.Event().wait()


if __name__ == "__main__":
    main()
