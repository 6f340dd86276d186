"""The examples in docstrings and in the README run, and CI runs the README's test command."""

import doctest
import importlib
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


@pytest.mark.parametrize("module_name", sorted(all_modules()))
def test_docstring_examples(module_name):
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def readme_blocks(language):
    text = open(os.path.join(ROOT, "README.md")).read()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_readme_opens_with_the_demo_and_test_commands_and_ci_runs_the_latter():
    demo, tests = readme_blocks("bash")[:2]
    assert "runtime.tools.demo" in demo and "pytest" in tests
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert tests.strip() in ci


def test_readme_job_example_runs(spark, capsys):
    example, *fragments = readme_blocks("python")
    exec(compile(example, "README.md", "exec"), {"__name__": "readme_example"})
    assert capsys.readouterr().out.strip() == "(9, 1000)"
    for fragment in fragments:  # configuration fragments that continue the example: they must at least parse
        compile(fragment, "README.md", "exec")
