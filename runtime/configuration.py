"""PyFlink's ``Configuration`` at the path Chandy's programs import it from (``pyflink.common.Configuration`` is
``runtime.common.Configuration``); it lives in :mod:`runtime.settings.configuration`.

>>> from runtime.configuration import Configuration
>>> Configuration().set_string("parallelism.default", "2").get_integer("parallelism.default")
2
"""

from runtime.settings.configuration import Configuration

__all__ = ["Configuration"]
