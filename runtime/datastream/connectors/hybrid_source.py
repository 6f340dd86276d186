"""PyFlink's ``pyflink.datastream.connectors.hybrid_source``, which Chandy does not provide.

Importing it raises an ImportError that says why, and what to use instead (see :mod:`runtime.not_provided`).
"""

from runtime.not_provided import refuse_import

refuse_import(__name__)
