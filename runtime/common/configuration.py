"""PyFlink's ``pyflink.common.configuration``: ``Configuration``.

>>> from runtime.common.configuration import Configuration
>>> Configuration().set_string("parallelism.default", "2").get_integer("parallelism.default")
2
"""

from runtime.settings.configuration import Configuration

__all__ = ["Configuration"]
