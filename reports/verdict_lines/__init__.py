"""The verdict's lines, one kind of adversary or finding per file (see `base.py`)."""
