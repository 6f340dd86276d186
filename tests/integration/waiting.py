"""Waiting for an event the test cannot subscribe to (a file, a count), with a deadline."""

import time


def wait_for(predicate, timeout=120, what="condition"):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
