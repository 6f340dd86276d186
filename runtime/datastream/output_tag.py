"""PyFlink's ``pyflink.datastream.output_tag``.

>>> OutputTag("late").tag_id
'late'
"""

from runtime.side_outputs import OutputTag

__all__ = ["OutputTag"]
