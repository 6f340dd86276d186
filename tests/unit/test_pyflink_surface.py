"""Every public name of PyFlink's DataStream API is either in Chandy, under PyFlink's module path with ``runtime``
for ``pyflink``, or listed in README.md's section ``## What Chandy does not provide``; and what that section lists
really is absent, so the list goes stale in neither direction.

The names are in ``tests/data/pyflink_public_names.json``: for each module of ``flink-python/pyflink/datastream``
and ``pyflink/common`` (Flink 2.3.0; no tests, no private modules), its ``__all__``, else its public top-level
classes and functions. Chandy provides a name when ``importlib.import_module(module)`` and ``getattr(module,
name)`` succeed; one it refuses on purpose raises its ``NotProvidedError`` (an ``ImportError``) instead.

What the README section lists: the backticked names at the head of its list items (before the first ``:`` or
`` — `` outside backticks) and in the first cell of its table rows; text after that (why, what to use instead) may
name anything. A listed name is written as

- ``name``: missing in every PyFlink module that has it (``SinkFunction``);
- ``module.name``: missing in that module (``runtime.common.time.Instant``);
- ``module``: the whole module is missing, all its names (``runtime.datastream.connectors.pulsar``);
- ``Name.attribute``: a method or attribute of a class that Chandy's class lacks (``DataStream.get_java_function``);

``pyflink.`` may stand for ``runtime.``.
"""

import importlib
import json
import re
from functools import lru_cache
from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parents[2]
_NAMES_FILE = _ROOT / "tests" / "data" / "pyflink_public_names.json"
_README = _ROOT / "README.md"
_SECTION = "## What Chandy does not provide"


def _pyflink_names() -> dict[str, list[str]]:
    data = json.loads(_NAMES_FILE.read_text())
    return {module: names for module, names in data.items() if module.startswith("runtime")}


@lru_cache(maxsize=None)
def _import(module: str):
    """The module, or the exception its import raised."""
    try:
        return importlib.import_module(module)
    except Exception as error:  # NotProvidedError, ModuleNotFoundError, or an ImportError of a dependency
        return error


def _resolve(module: str, path: str):
    """``(True, value)`` if Chandy has ``module`` and the attribute path in it, else ``(False, the exception)``."""
    found = _import(module)
    if isinstance(found, Exception):
        return False, found
    try:
        for part in path.split("."):
            found = getattr(found, part)
    except Exception as error:  # AttributeError, or NotProvidedError from a module __getattr__
        return False, error
    return True, found


def _section_lines(readme: str) -> list[str] | None:
    """The lines of the README section (to the next heading of level 1 or 2), outside code fences."""
    lines = readme.splitlines()
    if _SECTION not in (line.rstrip() for line in lines):
        return None
    start = [line.rstrip() for line in lines].index(_SECTION) + 1
    body, fenced = [], False
    for line in lines[start:]:
        if line.startswith("```"):
            fenced = not fenced
            continue
        if not fenced and re.match(r"#{1,2} ", line):
            break
        if not fenced:
            body.append(line)
    return body


def _head(line: str) -> str:
    """The part of a list item or table row that names what is missing ("" for other lines)."""
    stripped = line.strip()
    marker = re.match(r"\||(?:[-*+]|\d+[.)])\s+", stripped)
    if not marker:
        return ""
    item = stripped[marker.end():]
    outside = re.sub(r"`[^`]*`", lambda m: "\0" * len(m.group()), item)  # hide backticked text
    ends = ("|",) if marker.group() == "|" else (":", " — ", " – ")
    cut = [i for i in (outside.find(end) for end in ends) if i >= 0]
    return item[: min(cut)] if cut else item


def _listed(readme: str) -> list[str]:
    """The names the section lists, ``pyflink.`` read as ``runtime.``, in order of appearance."""
    lines = _section_lines(readme)
    tokens = []
    for line in lines or []:
        for token in re.findall(r"`([^`]+)`", _head(line)):
            token = token.strip().removesuffix("()")
            if token.startswith("pyflink."):
                token = "runtime." + token[len("pyflink."):]
            if re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", token):
                tokens.append(token)
    return tokens


def _covers(token: str, module: str, name: str) -> bool:
    return token in (name, f"{module}.{name}", module)


def test_every_pyflink_name_is_provided_or_listed_as_not_provided():
    names = _pyflink_names()
    readme = _README.read_text()
    listed = _listed(readme)
    todo: dict[str, list[tuple[str, str]]] = {}
    for module, module_names in sorted(names.items()):
        for name in module_names:
            provided, why = _resolve(module, name)
            if provided or any(_covers(token, module, name) for token in listed):
                continue
            if type(why).__name__ == "NotProvidedError":
                how = "refused: " + str(why).split(". ")[0] + "."
            elif isinstance(why, ModuleNotFoundError):
                how = "no such module"
            else:
                how = "no such name"
            todo.setdefault(module, []).append((name, how))
    if todo:
        count = sum(len(v) for v in todo.values())
        lines = [f"{count} PyFlink names are neither in Chandy nor listed in README.md's section {_SECTION!r} "
                 f"({'absent' if _section_lines(readme) is None else 'present'}); provide each, or list it there "
                 "(see this test module's docstring for the form), grouped by module:"]
        for module, entries in todo.items():
            hows = {how for _, how in entries}
            if len(hows) == 1 and len(entries) == len(names[module]) and not hows <= {"no such name"}:
                lines.append(f"  {module}  (the whole module; {hows.pop()}): " + ", ".join(n for n, _ in entries))
                continue
            lines.append(f"  {module}:")
            lines.extend(f"    - {name}  ({how})" for name, how in entries)
        pytest.fail("\n".join(lines), pytrace=False)


def test_what_the_readme_lists_as_not_provided_is_absent():
    names = _pyflink_names()
    modules_of: dict[str, list[str]] = {}
    for module, module_names in names.items():
        for name in module_names:
            modules_of.setdefault(name, []).append(module)
    stale = []
    for token in _listed(_README.read_text()):
        if token.startswith("runtime."):
            parts = token.split(".")
            for cut in range(len(parts), 0, -1):  # the longest prefix that is PyFlink's module, or Chandy's
                module = ".".join(parts[:cut])
                if module in names or not isinstance(_import(module), Exception):
                    break
            rest = ".".join(parts[cut:])
            if isinstance(_import(module), Exception):
                continue  # the module is missing or refused, and so is all in it
            if not rest or _resolve(module, rest)[0]:
                stale.append(f"{token}: Chandy has it")
            continue
        head, _, attribute = token.partition(".")
        if head not in modules_of:
            stale.append(f"{token}: {head} is no public name of PyFlink's DataStream API "
                         f"({_NAMES_FILE.relative_to(_ROOT)}); write module.name")
            continue
        present = [f"{module}.{token}" for module in modules_of[head] if _resolve(module, token)[0]]
        if present:
            stale.append(f"{token}: Chandy has " + ", ".join(present)
                         + ("" if attribute or len(present) == len(modules_of[head]) else
                            "; write module.name for the modules where it is missing"))
    assert not stale, ("README.md's section " + repr(_SECTION) + " lists what Chandy does provide:\n  "
                       + "\n  ".join(stale))
