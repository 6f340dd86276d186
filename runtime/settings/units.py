"""Sizes and rates as people read them, in log lines, the terminal's progress line and the CLI.

>>> human_bytes(0), human_bytes(1536), human_bytes(3 * 1024**3)
('0 B', '1.5 KiB', '3.0 GiB')
>>> human_count(950), human_count(1_234_567)
('950', '1.23M')
"""

from __future__ import annotations

__all__ = ["human_bytes", "human_count"]


def human_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def human_count(n: float) -> str:
    for divisor, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(n) >= divisor:
            return f"{n / divisor:.3g}{suffix}"
    return f"{n:.0f}"
