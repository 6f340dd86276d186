"""An outsider's attack on a running job, as the security review did it: list every TCP port the driver and the
job's Python workers listen on, and send each what would run a command if it were unpickled.

- a length-prefixed pickle, in the control protocol's framing;
- a data-channel header with guessed ids, followed by an Arrow stream whose ``pickled_batch`` value is that pickle;
- the same after answering the authentication challenge with a made-up proof.

The command creates a marker file: if the file ever exists, some process unpickled what a stranger sent. Each
connection is read until the other end closes it (or for ``read_timeout_s``), so that when :func:`attack` returns,
every port has seen and judged what it was sent.

Importable on its own by a job's driver script (the local-cluster test runs it there).
"""

from __future__ import annotations

import os
import pickle
import shlex
import socket
import struct

import pyarrow as pa

__all__ = ["listening_ports", "attack"]


class RunsACommand:
    """Unpickling this runs ``touch <marker>``."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {shlex.quote(self.marker)}",)


def _inodes_listening() -> dict[int, tuple[str, int]]:
    """inode -> (address, port) of every listening TCP socket (IPv4 and IPv6) in this network namespace."""
    listening = {}
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            address_hex, port_hex = fields[1].split(":")
            raw = bytes.fromhex(address_hex)
            if width == 4:
                address = socket.inet_ntop(socket.AF_INET, raw[::-1])
            else:  # four little-endian 32-bit words
                address = socket.inet_ntop(socket.AF_INET6, b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4)))
            listening[int(fields[9])] = (address, int(port_hex, 16))
    return listening


def listening_ports(pids) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket the processes ``pids`` listen on."""
    listening = _inodes_listening()
    found = set()
    for pid in pids:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inode = int(target[8:-1])
                if inode in listening:
                    found.add(listening[inode])
    return found


def _payloads(marker: str) -> list[bytes]:
    command = pickle.dumps(RunsACommand(marker))
    frame = struct.pack(">I", len(command)) + command
    schema = pa.schema([pa.field("pickled_batch", pa.large_binary())])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, schema) as writer:
        writer.write_batch(pa.RecordBatch.from_arrays([pa.array([command], pa.large_binary())], schema=schema))
    stream = sink.getvalue().to_pybytes()
    payloads = [frame]
    for attempt in (0, 1):
        for edge in range(4):
            for producer in (0, 1):
                for consumer in (0, 1):
                    payloads.append(struct.pack(">4sIIII", b"CHDY", attempt, edge, producer, consumer) + stream)
    return payloads


def _target(address: str, port: int) -> tuple[str, int]:
    return ("127.0.0.1" if address in ("0.0.0.0", "::") else address), port


def _send(target: tuple[str, int], payload: bytes, answer_challenge: bool, read_timeout_s: float) -> bool:
    """Send ``payload`` (after a made-up answer to the challenge, if asked); True when the other end then closed
    the connection within ``read_timeout_s``."""
    family = socket.AF_INET6 if ":" in target[0] else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.settimeout(read_timeout_s)
        try:
            sock.connect(target)
            if answer_challenge:
                sock.settimeout(1.0)  # a TLS endpoint says nothing first: it waits for a TLS hello
                try:
                    challenge = sock.recv(41)
                except socket.timeout:
                    challenge = b""
                sock.settimeout(read_timeout_s)
                if challenge.startswith(b"CHDYAUTH"):
                    sock.sendall(b"CHDYAUTH\x01" + os.urandom(32) + os.urandom(32))
            sock.sendall(payload)
            while sock.recv(65536):
                pass
            return True
        except socket.timeout:
            return False
        except OSError:  # reset: closed too
            return True


def attack(ports, marker: str, ours, read_timeout_s: float = 30.0) -> dict[tuple[str, int], bool]:
    """Every payload to every port; for each port, whether it closed every attack connection. Ports not in
    ``ours`` are Spark's own (PySpark's accumulator server in the driver, guarded by Spark's secret): they get the
    same payloads, but are not waited for beyond a second each (they may hold a connection open)."""
    closed = {}
    payloads = _payloads(marker)
    for address, port in sorted(ports):
        target = _target(address, port)
        timeout, tried = (read_timeout_s, payloads) if (address, port) in ours else (1.0, payloads[:2])
        results = [_send(target, payload, False, timeout) for payload in tried]
        results.append(_send(target, payloads[0], True, timeout))
        results.append(_send(target, payloads[1], True, timeout))
        closed[(address, port)] = all(results)
    return closed
