"""Partitioners: one module per way of splitting a train split among clients.

Each module registers a class with `@PARTITIONS.register(name)`; discovery imports them all.
Build partitions through `fedattack.data.partition.make_partition` (re-exported here), which
parses and checks options. Modules starting with `_` hold shared helpers and register nothing.
"""

from fedattack.data.partition import make_partition, parse_options, partition_from_spec

__all__ = ["make_partition", "parse_options", "partition_from_spec"]
