"""State time-to-live: PyFlink's ``StateTtlConfig``, given to ``descriptor.enable_time_to_live(...)``.

A keyed state with a TTL keeps, beside each entry (a value, a list element, a map entry), the processing time it
was last written (or read, with ``OnReadAndWrite``). An entry whose last access is ``ttl`` or more in the past
has expired: reads do not return it (``NeverReturnExpired``, the default), cleanup removes it, and checkpoints
do not contain it. The timestamps are checkpointed with the entries, so a restored entry expires when it would
have without the restart. TTL applies to keyed state only, and counts processing time only, as in Flink.

>>> from runtime.common.time import Time
>>> ttl = (StateTtlConfig.new_builder(Time.seconds(10))
...        .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
...        .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
...        .build())
>>> ttl.get_ttl(), ttl.get_update_type(), ttl.is_enabled()
(Time.milliseconds(10000), <UpdateType.OnReadAndWrite: 2>, True)
"""

from __future__ import annotations

import time
from enum import Enum

from runtime.settings.durations import Duration, Time
from runtime.settings.parsers import parse_duration_ms
from runtime.errors import ApiUsageError, ConfigurationError

__all__ = ["StateTtlConfig", "wall_clock_ms"]


def wall_clock_ms() -> int:
    """Processing time, in epoch milliseconds: the clock TTL timestamps are taken from. Wall-clock time, not
    monotonic, since the timestamps outlive the process (a restore on another machine compares them).

    >>> wall_clock_ms() > 1_600_000_000_000
    True
    """
    return time.time_ns() // 1_000_000


class _Strategy:
    """Equality and a repr from the fields: configurations compare by value."""

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self).__name__, *vars(self).values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{name.lstrip('_')}={value!r}" for name, value in vars(self).items())
        return f"{type(self).__name__}({fields})"


def _of(enum, value, setter: str):
    if not isinstance(value, enum):
        choices = ", ".join(f"StateTtlConfig.{enum.__name__}.{member.name}" for member in enum)
        raise ApiUsageError(f"StateTtlConfig.Builder.{setter}() expects one of {choices}, got {value!r}.")
    return value


class StateTtlConfig:
    """How a keyed state's entries expire (PyFlink's ``StateTtlConfig``): built with ``new_builder(ttl)``, given
    to ``descriptor.enable_time_to_live(ttl_config)``. Defaults, as in Flink: ``OnCreateAndWrite``,
    ``NeverReturnExpired``, processing time, cleanup in the background.

    >>> from runtime.common.time import Time
    >>> config = StateTtlConfig.new_builder(Time.minutes(5)).update_ttl_on_read_and_write().build()
    >>> config
    StateTtlConfig(ttl=Time.milliseconds(300000), update_type=OnReadAndWrite, state_visibility=NeverReturnExpired)
    >>> config.get_cleanup_strategies().get_incremental_cleanup_strategy().get_cleanup_size()
    5
    >>> try:
    ...     StateTtlConfig.new_builder(Time.seconds(0)).build()
    ... except ConfigurationError as error:
    ...     print(error)
    StateTtlConfig.new_builder(Time.milliseconds(0)): a time-to-live must be positive, e.g. Time.seconds(10).
    """

    class UpdateType(Enum):
        """When an entry's last-access timestamp is set, which prolongs its life."""

        Disabled = 0  # no TTL: the state never expires (as if enable_time_to_live was not called)
        OnCreateAndWrite = 1  # when the entry is created and on every write
        OnReadAndWrite = 2  # on every write and every read

    class StateVisibility(Enum):
        """Whether a read may return an entry that has expired but was not cleaned up yet."""

        ReturnExpiredIfNotCleanedUp = 0  # the read that finds it returns it, and removes it
        NeverReturnExpired = 1

    class TtlTimeCharacteristic(Enum):
        """The time TTL counts: processing time only, as in Flink."""

        ProcessingTime = 0

    def __init__(self, update_type: "StateTtlConfig.UpdateType", state_visibility: "StateTtlConfig.StateVisibility",
                 ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic", ttl: Time,
                 cleanup_strategies: "StateTtlConfig.CleanupStrategies"):
        if not isinstance(ttl, (Time, Duration)):
            raise ApiUsageError(f"StateTtlConfig.new_builder() expects a Time (or Duration), such as "
                                f"Time.seconds(10), got {ttl!r}.")
        if ttl.to_milliseconds() <= 0:
            raise ConfigurationError(f"StateTtlConfig.new_builder({ttl!r}): a time-to-live must be positive, "
                                     "e.g. Time.seconds(10).")
        self._update_type = _of(StateTtlConfig.UpdateType, update_type, "set_update_type")
        self._state_visibility = _of(StateTtlConfig.StateVisibility, state_visibility, "set_state_visibility")
        self._ttl_time_characteristic = _of(StateTtlConfig.TtlTimeCharacteristic, ttl_time_characteristic,
                                            "set_ttl_time_characteristic")
        self._ttl = ttl
        self._cleanup_strategies = cleanup_strategies

    @staticmethod
    def new_builder(ttl: Time) -> "StateTtlConfig.Builder":
        return StateTtlConfig.Builder(ttl)

    def get_update_type(self) -> "StateTtlConfig.UpdateType":
        return self._update_type

    def get_state_visibility(self) -> "StateTtlConfig.StateVisibility":
        return self._state_visibility

    def get_ttl(self) -> Time:
        return self._ttl

    def get_ttl_time_characteristic(self) -> "StateTtlConfig.TtlTimeCharacteristic":
        return self._ttl_time_characteristic

    def is_enabled(self) -> bool:
        return self._update_type is not StateTtlConfig.UpdateType.Disabled

    def get_cleanup_strategies(self) -> "StateTtlConfig.CleanupStrategies":
        return self._cleanup_strategies

    def _key(self) -> tuple:
        return (self._update_type, self._state_visibility, self._ttl_time_characteristic,
                parse_duration_ms(self._ttl, "StateTtlConfig ttl"),
                self._cleanup_strategies)

    def __eq__(self, other) -> bool:
        return isinstance(other, StateTtlConfig) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"StateTtlConfig(ttl={self._ttl!r}, update_type={self._update_type.name}, "
                f"state_visibility={self._state_visibility.name})")

    class Builder:
        """Builds a :class:`StateTtlConfig`; every setter returns the builder.

        >>> from runtime.common.time import Time
        >>> config = (StateTtlConfig.new_builder(Time.hours(1)).return_expired_if_not_cleaned_up()
        ...           .cleanup_full_snapshot().cleanup_incrementally(10, False).build())
        >>> config.get_state_visibility().name, config.get_cleanup_strategies().in_full_snapshot()
        ('ReturnExpiredIfNotCleanedUp', True)
        """

        def __init__(self, ttl: Time):
            self._ttl = ttl
            self._update_type = StateTtlConfig.UpdateType.OnCreateAndWrite
            self._state_visibility = StateTtlConfig.StateVisibility.NeverReturnExpired
            self._ttl_time_characteristic = StateTtlConfig.TtlTimeCharacteristic.ProcessingTime
            self._is_cleanup_in_background = True
            self._strategies: dict = {}

        def set_update_type(self, update_type: "StateTtlConfig.UpdateType") -> "StateTtlConfig.Builder":
            self._update_type = _of(StateTtlConfig.UpdateType, update_type, "set_update_type")
            return self

        def update_ttl_on_create_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnCreateAndWrite)

        def update_ttl_on_read_and_write(self) -> "StateTtlConfig.Builder":
            return self.set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)

        def set_state_visibility(self, state_visibility: "StateTtlConfig.StateVisibility") \
                -> "StateTtlConfig.Builder":
            self._state_visibility = _of(StateTtlConfig.StateVisibility, state_visibility, "set_state_visibility")
            return self

        def return_expired_if_not_cleaned_up(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)

        def never_return_expired(self) -> "StateTtlConfig.Builder":
            return self.set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)

        def set_ttl_time_characteristic(self, ttl_time_characteristic: "StateTtlConfig.TtlTimeCharacteristic") \
                -> "StateTtlConfig.Builder":
            """Processing time is the only one (as in Flink): entries expire by the wall clock, not watermarks."""
            self._ttl_time_characteristic = _of(StateTtlConfig.TtlTimeCharacteristic, ttl_time_characteristic,
                                                "set_ttl_time_characteristic")
            return self

        def use_processing_time(self) -> "StateTtlConfig.Builder":
            return self.set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)

        def cleanup_full_snapshot(self) -> "StateTtlConfig.Builder":
            """Leave expired entries out of full snapshots. The heap backend always does (its checkpoints are
            full snapshots, filtered as they are written); this is accepted and recorded."""
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT] = \
                StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY
            return self

        def cleanup_incrementally(self, cleanup_size: int, run_cleanup_for_every_record: bool) \
                -> "StateTtlConfig.Builder":
            """On every access to the state, check the next ``cleanup_size`` entries of a walk over all of its
            keys and remove the expired ones, so that state no key reads again is freed too.

            ``run_cleanup_for_every_record``: Flink also runs the step for every record processed. Here the step
            runs on accesses to the state only: a record that touches no TTL state costs nothing."""
            if isinstance(cleanup_size, bool) or not isinstance(cleanup_size, int) or cleanup_size < 0:
                raise ConfigurationError(f"cleanup_incrementally({cleanup_size!r}, ...): the number of entries to "
                                         "check per state access is a whole number >= 0, e.g. 10.")
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP] = \
                StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(cleanup_size,
                                                                            bool(run_cleanup_for_every_record))
            return self

        def cleanup_in_rocksdb_compact_filter(self, query_time_after_num_entries: int,
                                              periodic_compaction_time: Duration = Duration.of_days(30)) \
                -> "StateTtlConfig.Builder":
            """Remove expired entries when RocksDB compacts its files. Accepted and recorded, for a backend that
            compacts; the heap backend has no compaction, so there it changes nothing (expired entries still go
            on access, by incremental cleanup and from checkpoints)."""
            self._strategies[StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER] = \
                StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(query_time_after_num_entries,
                                                                                     periodic_compaction_time)
            return self

        def disable_cleanup_in_background(self) -> "StateTtlConfig.Builder":
            """No default background cleanup (on the heap: incremental cleanup of 5 entries per access). A
            strategy set explicitly (``cleanup_incrementally``) still runs."""
            self._is_cleanup_in_background = False
            return self

        def set_ttl(self, ttl: Time) -> "StateTtlConfig.Builder":
            self._ttl = ttl
            return self

        def build(self) -> "StateTtlConfig":
            return StateTtlConfig(self._update_type, self._state_visibility, self._ttl_time_characteristic,
                                  self._ttl,
                                  StateTtlConfig.CleanupStrategies(dict(self._strategies),
                                                                   self._is_cleanup_in_background))

    class CleanupStrategies:
        """When expired entries are removed, beyond the read that finds them expired.

        >>> from runtime.common.time import Time
        >>> config = StateTtlConfig.new_builder(Time.seconds(1)).disable_cleanup_in_background().build()
        >>> strategies = config.get_cleanup_strategies()
        >>> strategies.is_cleanup_in_background(), strategies.get_incremental_cleanup_strategy()
        (False, None)
        """

        class Strategies(Enum):
            FULL_STATE_SCAN_SNAPSHOT = 0
            INCREMENTAL_CLEANUP = 1
            ROCKSDB_COMPACTION_FILTER = 2

        class CleanupStrategy(_Strategy):
            """A cleanup strategy's settings."""

        class EmptyCleanupStrategy(CleanupStrategy):
            """A strategy without settings (full-snapshot cleanup)."""

        class IncrementalCleanupStrategy(CleanupStrategy):
            def __init__(self, cleanup_size: int, run_cleanup_for_every_record: bool):
                self._cleanup_size = cleanup_size
                self._run_cleanup_for_every_record = run_cleanup_for_every_record

            def get_cleanup_size(self) -> int:
                return self._cleanup_size

            def run_cleanup_for_every_record(self) -> bool:
                return self._run_cleanup_for_every_record

        class RocksdbCompactFilterCleanupStrategy(CleanupStrategy):
            def __init__(self, query_time_after_num_entries: int,
                         periodic_compaction_time: Duration = Duration.of_days(30)):
                self._query_time_after_num_entries = query_time_after_num_entries
                self._periodic_compaction_time = periodic_compaction_time

            def get_query_time_after_num_entries(self) -> int:
                return self._query_time_after_num_entries

            def get_periodic_compaction_time(self) -> Duration:
                return self._periodic_compaction_time

        EMPTY_STRATEGY: "StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy"  # set below the class

        def __init__(self, strategies: dict, is_cleanup_in_background: bool):
            self._strategies = strategies
            self._is_cleanup_in_background = is_cleanup_in_background

        def is_cleanup_in_background(self) -> bool:
            return self._is_cleanup_in_background

        def in_full_snapshot(self) -> bool:
            return StateTtlConfig.CleanupStrategies.Strategies.FULL_STATE_SCAN_SNAPSHOT in self._strategies

        def get_incremental_cleanup_strategy(self) \
                -> "StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy | None":
            default = (StateTtlConfig.CleanupStrategies.IncrementalCleanupStrategy(5, False)
                       if self._is_cleanup_in_background else None)
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.INCREMENTAL_CLEANUP, default)

        def get_rocksdb_compact_filter_cleanup_strategy(self) \
                -> "StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy | None":
            default = (StateTtlConfig.CleanupStrategies.RocksdbCompactFilterCleanupStrategy(1000)
                       if self._is_cleanup_in_background else None)
            return self._strategies.get(StateTtlConfig.CleanupStrategies.Strategies.ROCKSDB_COMPACTION_FILTER,
                                        default)

        def __eq__(self, other) -> bool:
            return (isinstance(other, StateTtlConfig.CleanupStrategies)
                    and other._is_cleanup_in_background == self._is_cleanup_in_background
                    and other._strategies == self._strategies)

        def __hash__(self) -> int:
            return hash((self._is_cleanup_in_background, frozenset(self._strategies.items())))


StateTtlConfig.CleanupStrategies.EMPTY_STRATEGY = StateTtlConfig.CleanupStrategies.EmptyCleanupStrategy()
