"""Pickling a job graph with its user functions so that a traceback from an executor points at the user's file.

cloudpickle ships functions defined in the user's script by value, and writes ``<dynamic-code>`` as the file name of
their code (to make its output the same wherever a function was defined). A failure on an executor then shows
``File "<dynamic-code>", line 4, in parse``; this pickler keeps the real file name instead, so the traceback says
``File "/home/ann/job.py", line 4, in parse`` (with the source line where the file exists).

>>> import pickle
>>> def parse(text):
...     return int(text)
>>> pickle.loads(dumps(parse)).__code__.co_filename == parse.__code__.co_filename != "<dynamic-code>"
True
"""

from __future__ import annotations

import io
import pickle
import types
from collections import ChainMap

import cloudpickle
from cloudpickle import cloudpickle as _cloudpickle

__all__ = ["dumps"]

_DYNAMIC = "<dynamic-code>"


def _code_reduce_keeping_file(code: types.CodeType):
    constructor, args = _cloudpickle._code_reduce(code)
    return constructor, tuple(code.co_filename if arg == _DYNAMIC and type(arg) is str else arg for arg in args)


class _Pickler(cloudpickle.Pickler):
    dispatch_table = ChainMap({types.CodeType: _code_reduce_keeping_file}, cloudpickle.Pickler.dispatch_table)


def dumps(obj, protocol: int = pickle.HIGHEST_PROTOCOL) -> bytes:
    """``cloudpickle.dumps(obj)``, with the user's code keeping its file names."""
    with io.BytesIO() as file:
        _Pickler(file, protocol=protocol).dump(obj)
        return file.getvalue()
