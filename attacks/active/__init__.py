"""A server that acts during training: the servers themselves (`servers/`, the `ACTIVE` registry)
and what reads their rounds back (`readout`, an attack; `_reading`, the closed-form reading both
share).
"""
