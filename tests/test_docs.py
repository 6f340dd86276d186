"""The examples in docstrings and in the README run, and CI runs the README's test command."""

import doctest
import importlib
import inspect
import os
import pkgutil
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ["runtime", "operators", "state_backends", "benchmarks"]


def all_modules():
    for package in PACKAGES:
        yield package
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            yield info.name


PLUMBING = "internal plumbing (Spark tasks, sockets, threads), exercised by integration tests"
BENCHMARK = "benchmark run: starts Spark and measures (python -m benchmarks)"
PACKAGE = "package: its modules carry the examples"

# The modules that may run no docstring example, each with its reason. Every other module must run at least
# one, so that a new module comes with an example; a module listed here that gains one must leave the list.
NO_EXAMPLES = {
    "benchmarks": "empty package file",
    "benchmarks.__main__": BENCHMARK,
    "benchmarks.latency": BENCHMARK,
    "benchmarks.backpressure": BENCHMARK,
    "benchmarks.recovery": BENCHMARK,
    "benchmarks.spark_baseline": BENCHMARK,
    "benchmarks.throughput": BENCHMARK,
    "benchmarks.table_sinks": BENCHMARK,
    "benchmarks.floor": "benchmark run: measures the parts of a record's cost (python -m benchmarks.floor)",
    "benchmarks.metrics_overhead": BENCHMARK,
    "benchmarks.security": BENCHMARK,
    "benchmarks.snapshot": "benchmark: measures snapshot timings, which vary from run to run",
    "operators": "re-exports only: each name's own docstring has an example (test_public_api_has_examples)",
    "operators.committing": "re-exports only: operators.committing.sink and .committables have the examples",
    "operators.iceberg": "package docstring only: operators.iceberg.sink has the examples",
    "state_backends": "re-exports only: each name's own docstring has an example (test_public_api_has_examples)",
    "operators.operator": "abstract operator kinds: their examples are on the subclasses (builtins, columnar, ...)",
    "operators.jdbc.server_checks": "every function asks a PostgreSQL server: tests/unit/test_jdbc_sink.py runs them",
    "runtime.driver.control_server": PLUMBING,
    "runtime.driver.job": PLUMBING,
    "runtime.driver.launcher": PLUMBING,
    "runtime.executor.entry": PLUMBING,
    "runtime.executor.slot": PLUMBING,
    "runtime.executor.subtask": PLUMBING,
    "runtime.driver": PACKAGE,
    "runtime.executor": PACKAGE,
    "runtime.graph": PACKAGE,
    "runtime.network": PACKAGE,
    "runtime.protocol": PACKAGE,
    "state_backends.heap": PACKAGE,
}


# Modules that mirror a PyFlink module Chandy deliberately lacks (a Kafka connector ...): importing one raises
# runtime.not_provided.NotProvidedError, an ImportError saying why and what to use instead. The catalogue of
# reasons, runtime.not_provided.MISSING_MODULES, lists them.
MISSING_ON_PURPOSE = {
    "runtime.datastream.connectors.cassandra",
    "runtime.datastream.connectors.dynamic_kafka",
    "runtime.datastream.connectors.elasticsearch",
    "runtime.datastream.connectors.hybrid_source",
    "runtime.datastream.connectors.kinesis",
    "runtime.datastream.connectors.pubsub",
    "runtime.datastream.connectors.pulsar",
    "runtime.datastream.connectors.rabbitmq",
}


@pytest.mark.parametrize("module_name", sorted(set(all_modules()) - MISSING_ON_PURPOSE))
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    if module_name in NO_EXAMPLES:
        assert result.attempted == 0, f"{module_name} runs examples now: remove it from NO_EXAMPLES"
    else:
        assert result.attempted > 0, (f"{module_name} runs no docstring example: add one (a `>>>` example in the "
                                      "module's or an object's docstring), or list it in NO_EXAMPLES with a reason")


def test_docstring_exemptions_name_existing_modules():
    assert set(NO_EXAMPLES) <= set(all_modules())
    assert MISSING_ON_PURPOSE <= set(all_modules()) and not MISSING_ON_PURPOSE & set(NO_EXAMPLES)


@pytest.mark.parametrize("module_name", sorted(MISSING_ON_PURPOSE))
def test_missing_on_purpose_exemptions_say_why_and_what_instead(module_name):
    from runtime.not_provided import MISSING_MODULES, NotProvidedError

    assert module_name in MISSING_MODULES
    with pytest.raises(NotProvidedError, match=rf"^Chandy does not provide {module_name} .*Why: .*Instead: "):
        importlib.import_module(module_name)


# The user API: the classes and functions named in these modules' __all__, and runtime's lazy exports.
API_MODULES = ["runtime.datastream", "runtime.common", "runtime.datastream.connectors", "runtime.datastream.state",
               "runtime.common.serialization", "operators", "state_backends"]

# Public names without an example, by their definition's module.qualname, with the reason. A name that gets an
# example must leave the list.
PUBLIC_WITHOUT_EXAMPLES: dict[str, str] = {}


def public_api() -> dict:
    """``{module.qualname of the definition: object}`` of every public class and function (not constants)."""
    import runtime

    exported = [(name, importlib.import_module(module)) for module in API_MODULES
                for name in importlib.import_module(module).__all__]
    exported += [(name, runtime) for name in runtime._EXPORTS]
    api = {}
    for name, module in exported:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            api[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return api


def checks_an_output(docstring: str | None) -> bool:
    """Whether the docstring has a ``>>>`` example that runs and compares an output (or an exception)."""
    examples = doctest.DocTestParser().get_examples(docstring or "")
    return any((example.want.strip() or example.exc_msg) and not example.options.get(doctest.SKIP)
               for example in examples)


@pytest.mark.parametrize("qualified_name", sorted(public_api()))
def test_public_api_has_examples(qualified_name):
    obj = public_api()[qualified_name]
    docstring = obj.__dict__.get("__doc__") if inspect.isclass(obj) else obj.__doc__  # its own, not inherited
    if qualified_name in PUBLIC_WITHOUT_EXAMPLES:
        assert not checks_an_output(docstring), f"{qualified_name} has an example now: remove it from the list"
    else:
        assert checks_an_output(docstring), (f"{qualified_name} is public API: its docstring needs a `>>>` example "
                                             "that checks an output")


def test_public_without_examples_lists_only_public_names():
    assert set(PUBLIC_WITHOUT_EXAMPLES) <= set(public_api())


def readme_blocks(language):
    text = open(os.path.join(ROOT, "README.md")).read()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_readme_opens_with_the_demo_and_test_commands_and_ci_runs_the_latter():
    demo, tests = readme_blocks("bash")[:2]
    assert "runtime.tools.demo" in demo and "pytest" in tests
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert tests.strip() in ci


def expected_prints(block: str) -> list[str]:
    """What a README block says it prints: the ``# ...`` comment after each ``print(...)`` line."""
    return [line.split("#", 1)[1].strip() for line in block.splitlines()
            if line.startswith("print(") and "#" in line]


# Command lines of the README's bash blocks that this test does not run, and why. Everything else runs.
NOT_RUN_HERE = {
    "python3 -m venv .venv": "the setup commands: CI runs them on a fresh machine (.ci/run)",
    "spark-submit --master spark://host:7077": "needs a cluster; test_deployment runs spark-submit with --py-files "
                                               "on local[2]",
    "chandy savepoint ": "needs a running job: test_savepoints runs it against one",
    "chandy stop ": "needs a running job: test_savepoints runs it against one",
    "chandy jobs ": "needs a running driver: test_dashboard runs it against one",
    "chandy status ": "needs a running job: test_dashboard runs it against one",
    "chandy trigger-checkpoint ": "needs a running job: test_dashboard runs it against one",
    "chandy cancel ": "needs a running job: test_dashboard runs it against one",
}


def test_every_readme_block_runs(spark, kafka, postgres, s3_server, tmp_path, monkeypatch, capsys):
    """The python blocks run in order, each printing what its comments say; then the ``chandy`` command lines.
    The Kafka block's ``localhost:9092`` is the session's broker (there, unless the port was taken); the
    PostgreSQL block's URL, user and password are the session's server's; the S3 block reaches the session's S3
    server through the environment, as a user's job would (tests/s3_server.py)."""
    from runtime.tools.cli import main as chandy

    monkeypatch.chdir(tmp_path)
    python_blocks = readme_blocks("python")
    assert len(python_blocks) >= 4
    for number, block in enumerate(python_blocks, 1):
        block = block.replace("localhost:9092", kafka.bootstrap)
        block = block.replace('"jdbc:postgresql://localhost:5432/postgres", "chandy", "secret"',
                              f"{postgres.jdbc_url!r}, {postgres.user!r}, {postgres.password!r}")
        block = block.replace('"localhost", 5432, "chandy", "secret"',
                              f"{postgres.host!r}, {postgres.port}, {postgres.user!r}, {postgres.password!r}")
        exec(compile(block, f"README.md python block {number}", "exec"), {"__name__": f"readme_block_{number}"})
        printed = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
        assert printed == expected_prints(block), f"README python block {number}"
    commands = [line.split("#")[0].strip() for block in readme_blocks("bash") for line in block.splitlines()
                if line.strip()]
    ran = 0
    for command in commands:
        if any(command.startswith(prefix) for prefix in NOT_RUN_HERE):
            continue
        assert command.startswith("chandy "), f"README command not run by any test: {command}"
        assert chandy(command.split()[1:]) == 0, command
        output = capsys.readouterr().out
        assert output.strip() and "No completed checkpoint" not in output, command
        ran += 1
    assert ran >= 3
    assert (tmp_path / "chandy.zip").exists()
