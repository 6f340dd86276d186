"""PostgreSQL: a sink that writes at least once (plain statements, or upserts by key that make a keyed table exact)
and one that writes exactly once (PostgreSQL's two-phase commit), on psycopg. PyFlink's ``JdbcSink`` and its
options are in :mod:`runtime.datastream.connectors.jdbc`.

>>> from operators.jdbc import Statement
>>> Statement.from_jdbc("update stock set count = ? where item = ?").text
'update stock set count = %s where item = %s'
"""

from operators.jdbc.at_least_once import PostgresSink
from operators.jdbc.binding import RowLayout, StatementBinding, UpsertBinding
from operators.jdbc.connection import PostgresConnectionSettings
from operators.jdbc.exactly_once import PostgresExactlyOnceSink, PostgresTransaction
from operators.jdbc.options import BatchSettings, ExactlyOnceSettings
from operators.jdbc.statements import Statement, upsert_statements
from operators.jdbc.transaction_ids import TransactionId

__all__ = ["PostgresSink", "PostgresExactlyOnceSink", "PostgresTransaction", "PostgresConnectionSettings",
           "BatchSettings", "ExactlyOnceSettings", "Statement", "upsert_statements", "RowLayout", "StatementBinding",
           "UpsertBinding", "TransactionId"]
