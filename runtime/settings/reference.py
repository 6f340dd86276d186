"""The README's configuration reference, rendered from the option table.

``python -m runtime.settings.reference README.md`` rewrites the block between the markers; a unit test fails
when the README's block differs from what :func:`render` gives, so the table and the documentation cannot drift.

>>> text = render()
>>> text.splitlines()[0] == BEGIN and text.splitlines()[-1] == END
True
>>> [line for line in text.splitlines() if "spark.chandy.heartbeatTimeout" in line]
['| `heartbeat.timeout` | `spark.chandy.heartbeatTimeout` | duration | 30 s | A slot silent this long is taken for hung: the attempt fails and the job restarts. |']
"""

from __future__ import annotations

import sys

from runtime.settings.options import IGNORED_FLINK_KEYS, IGNORED_FLINK_PREFIXES, OPTIONS, Applied, Option

__all__ = ["render", "readme_block", "replace_block", "BEGIN", "END"]

BEGIN = "<!-- configuration reference, rendered from runtime/settings/options.py: python -m runtime.settings.reference -->"
END = "<!-- end of the configuration reference -->"

_INTRO = """\
Every setting is a Flink key in the job's `Configuration` (`env.configure(config)`), a `spark.chandy.*` Spark conf
(`spark-submit --conf`, or `spark.conf.set` before `execute()`), or both. Booleans are `true`/`false`, `yes`/`no`,
`on`/`off` or `1`/`0` in any case; durations are written as Flink writes them (`10 s`, `500 ms`, `1 min`, `2 h`;
a bare number is milliseconds). A value that does not parse fails where it is set (`configure()`) or in
`execute()` before any Spark job, naming the key, the value and what it takes. A `spark.chandy.*` conf or a
`Configuration` key that Chandy does not know is named in a warning with the nearest key it knows."""

_ENVIRONMENT = """\
Set in the job: `env.configure(config)` applies these through the environment's setters (PyFlink's getters show
them, and a setter called later wins). A Spark conf here overrides the job, to switch it without editing it."""

_LAUNCH = """\
Read when the job launches: the job's `Configuration` key wins over the Spark conf, except where the line says
otherwise."""


def _default(option: Option) -> str:
    if option.default_text is not None:
        return option.default_text
    if option.default is None:
        return "none"
    if isinstance(option.default, bool):
        return str(option.default).lower()
    return str(option.default)


def _row(option: Option) -> str:
    flink = " or ".join(f"`{key}`" for key in option.flink_keys) or "-"
    spark = f"`{option.spark_key}`" if option.spark_key else "-"
    return f"| {flink} | {spark} | {option.kind} | {_default(option)} | {option.description} |"


def _table(applied: Applied) -> list[str]:
    rows = [_row(option) for option in OPTIONS if option.applied is applied]
    return ["| Flink key | Spark conf | Value | Default | What it does |", "|---|---|---|---|---|", *rows]


def render() -> str:
    """The reference as Markdown, between its markers."""
    ignored = ", ".join(f"`{key}`" for key in IGNORED_FLINK_KEYS)
    prefixes = ", ".join(f"`{prefix}*`" if prefix.endswith(".") else f"`{prefix}`" for prefix in
                         IGNORED_FLINK_PREFIXES)
    lines = [BEGIN, _INTRO, "", _ENVIRONMENT, "", *_table(Applied.ENVIRONMENT), "", _LAUNCH, "",
             *_table(Applied.LAUNCH), "",
             f"Flink keys accepted without effect (a JVM cluster's, PyFlink's harness's, or derived): {ignored}, and "
             f"those starting with {prefixes}.", END]
    return "\n".join(lines)


def readme_block(readme: str) -> str:
    """The reference block of the README's text (markers included); ValueError when the markers are missing."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the README has no configuration reference between {BEGIN!r} and {END!r}")
    return readme[start:end + len(END)]


def replace_block(readme: str) -> str:
    """The README's text with its reference block rendered afresh.

    >>> replace_block(f"intro\\n{BEGIN}\\nstale\\n{END}\\nrest") == f"intro\\n{render()}\\nrest"
    True
    """
    return readme.replace(readme_block(readme), render())


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else "README.md"
    with open(path) as file:
        text = file.read()
    with open(path, "w") as file:
        file.write(replace_block(text))
