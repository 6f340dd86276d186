"""Where a REST answer's time went, as the HTTP ``Server-Timing`` header carries it (W3C Server Timing): names with
durations in milliseconds. The dashboard's lookups of queryable state send it; browsers' developer tools show it,
and :class:`~runtime.tools.queryable_state.QueryableStateClient` reads it.

>>> header = server_timing({"driver": 4.25, "slot": 3.5})
>>> header
'driver;dur=4.250, slot;dur=3.500'
>>> parse_server_timing(header)
{'driver': 4.25, 'slot': 3.5}
>>> parse_server_timing('cache;desc="hit", db;dur=bad, total;dur=1') == {'total': 1.0}
True
"""

from __future__ import annotations

__all__ = ["server_timing", "parse_server_timing"]


def server_timing(durations_ms: dict[str, float]) -> str:
    """The header's value for ``durations_ms`` (name -> milliseconds)."""
    return ", ".join(f"{name};dur={ms:.3f}" for name, ms in durations_ms.items())


def parse_server_timing(header: str | None) -> dict[str, float]:
    """name -> milliseconds of every metric with a readable ``dur``; metrics without one are left out."""
    durations: dict[str, float] = {}
    for metric in (header or "").split(","):
        name, *parameters = (part.strip() for part in metric.split(";"))
        for parameter in parameters:
            key, _, value = parameter.partition("=")
            if key.strip().lower() == "dur":
                try:
                    durations[name] = float(value.strip().strip('"'))
                except ValueError:
                    pass
    return durations
