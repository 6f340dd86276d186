"""The folders show the architecture: no module imports a module of a higher layer.

Layers, bottom to top (a module may import its own layer and those below):

0. shared leaves: at the root of ``runtime`` (errors, ids, types, side outputs, checkpoint settings) and
   ``runtime.settings`` (parsers, the option table, Configuration, durations, units)
1. ``runtime.keys`` (key groups, stable hash) and ``runtime.protocol`` (messages, events, checkpoints)
2. ``state_backends``
3. ``operators``
4. ``runtime.graph``
5. ``runtime.network``
6. ``runtime.executor``
7. ``runtime.driver``
8. ``runtime.datastream``, ``runtime.common`` and ``runtime.table`` (PyFlink's user API)
9. ``runtime.tools`` and the ``runtime`` package itself (the public facade)
"""

import ast
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LAYERS = [
    ("runtime.errors", "runtime.ids", "runtime.types", "runtime.side_outputs", "runtime.gc_pause",
     "runtime.filesystems", "runtime.checkpoint_config", "runtime.configuration", "runtime.not_provided",
     "runtime.restart_strategies", "runtime.settings"),
    ("runtime.keys", "runtime.protocol"),
    ("state_backends",),
    ("operators",),
    ("runtime.graph",),
    ("runtime.network",),
    ("runtime.executor",),
    ("runtime.driver",),
    ("runtime.datastream", "runtime.common", "runtime.table"),
    ("runtime.tools", "runtime"),
]
PACKAGES = ("runtime", "operators", "state_backends")


def layer_of(module: str) -> int:
    best, best_len = None, -1
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = level, len(prefix)
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best


def project_modules():
    for package in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    module = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    yield module.removesuffix(".__init__"), path


def imported_modules(path: str, module: str):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # ``from runtime import X`` reaches the facade unless X is a submodule
            if node.module in PACKAGES:
                for alias in node.names:
                    candidate = f"{node.module}.{alias.name}"
                    exists = any(os.path.exists(os.path.join(ROOT, *candidate.split(".")) + suffix)
                                 for suffix in (".py", "/__init__.py"))
                    yield candidate if exists else node.module
            else:
                yield node.module


def test_no_module_imports_a_higher_layer():
    upward = []
    for module, path in project_modules():
        own = layer_of(module)
        for imported in imported_modules(path, module):
            if imported.split(".")[0] not in PACKAGES:
                continue
            if layer_of(imported) > own:
                upward.append(f"{module} (layer {own}) imports {imported} (layer {layer_of(imported)})")
    assert upward == []


def test_every_module_belongs_to_a_layer():
    for module, _ in project_modules():
        layer_of(module)


def test_state_backends_and_operators_do_not_load_the_api_the_driver_or_the_executor():
    code = ("import sys, state_backends, state_backends.heap, state_backends.storage, operators; "
            "print(sorted(m for m in sys.modules if m.startswith('runtime.')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = eval(out.stdout)
    for module in loaded:
        assert layer_of(module) <= 1, f"importing state_backends/operators loaded {module}"
