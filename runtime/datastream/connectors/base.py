"""PyFlink's ``pyflink.datastream.connectors.base``: the base classes of sources and sinks, and delivery guarantees.

A PyFlink ``Source`` or ``Sink`` wraps a Java object; Chandy's are Python classes you can implement
(:class:`operators.sources.Source`, :class:`operators.sinks.Sink`), which ``env.from_source`` and
``stream.sink_to`` take.

>>> from runtime.datastream.connectors.base import DeliveryGuarantee, Source
>>> from runtime.datastream.connectors.number_seq import NumberSequenceSource
>>> isinstance(NumberSequenceSource(1, 3), Source), DeliveryGuarantee.EXACTLY_ONCE.name
(True, 'EXACTLY_ONCE')
"""

from __future__ import annotations

from operators.sinks import DeliveryGuarantee, Sink
from operators.sources import Source

__all__ = ["Source", "Sink", "DeliveryGuarantee"]
