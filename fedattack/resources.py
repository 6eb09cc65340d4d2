"""The machine's memory as an evaluation plans and polices it: what is free, what this process
holds, its peak, and a guard that turns an allocation past the budget into a one-line error.

Read from Linux's /proc and cgroup files (no dependency); elsewhere every function answers
conservatively (no reading: no default budget beyond a fixed 4 GiB, no peak, no guard). The
budget is on the process's resident memory: the dataset, the model and the attack together,
which is what the kernel's out-of-memory killer judges.
"""

from __future__ import annotations

import contextlib
import re
import resource
from collections.abc import Iterator
from pathlib import Path

from fedattack.registry import UserError

GIB = 2**30
SAFE_SHARE = 0.5  # of the memory available when the evaluation starts: other work keeps the rest
FALLBACK = 4 * GIB  # where nothing can be read
UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
         "g": GIB, "gb": GIB, "gib": GIB, "t": 2**40, "tb": 2**40, "tib": 2**40}


def _kib(path: str, key: str) -> int | None:
    """Bytes of a "Key:  N kB" line of a /proc file (None where it cannot be read)."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _meminfo(key: str) -> int | None:
    return _kib("/proc/meminfo", key)


def _cgroup_room() -> int | None:
    """What the process's cgroup (v2) still allows, if it sets a limit."""
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit == "max":
            return None
        used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        return max(0, int(limit) - used)
    except (OSError, ValueError):
        return None


def _status(key: str) -> int | None:
    return _kib("/proc/self/status", key)


def available() -> int | None:
    """Bytes this process could still take: the kernel's MemAvailable, the cgroup's room, and
    the address-space limit's room (`ulimit -v`), whichever is least; None if none is known."""
    known = [v for v in (_meminfo("MemAvailable"), _cgroup_room(), _address_room()) if v is not None]
    return min(known) if known else None


def _address_room() -> int | None:
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    size = _status("VmSize")
    if soft == resource.RLIM_INFINITY or size is None:
        return None
    return max(0, soft - size)


def rss() -> int:
    """This process's resident memory now (0 where it cannot be read)."""
    return _status("VmRSS") or 0


def default_budget() -> int:
    """A safe share of what is available now, plus what the process already holds."""
    free = available()
    return rss() + int(SAFE_SHARE * free) if free is not None else FALLBACK


def reset_peak() -> bool:
    """Start measuring the peak afresh (Linux: clear_refs 5); False where it cannot."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak() -> int:
    """This process's peak resident memory since the last `reset_peak` (0: unknown)."""
    return _status("VmHWM") or 0


def parse_size(text: str | int | float, what: str = "--memory") -> int:
    """Bytes from '8G', '512M', '1.5GiB' or a number of bytes; a one-line error otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(text))
        if not match or match.group(2).lower() not in UNITS:
            raise UserError(f"{what} {text!r} is not a size; write e.g. 8G, 512M or 1.5GiB")
        value, unit = float(match.group(1)), match.group(2).lower()
    size = int(value * UNITS[unit])
    if size <= 0:
        raise UserError(f"{what} {text!r} must be more than zero")
    return size


def parse_duration(text: str | int | float, what: str = "--time") -> float:
    """Seconds from '30m', '2h', '90s', '1h30m' or a number of seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        seconds = float(text)
    else:
        parts = re.findall(r"([0-9]*\.?[0-9]+)\s*([hms]?)", str(text).strip().lower())
        rebuilt = "".join(f"{n}{u}" for n, u in parts)
        if not parts or rebuilt != re.sub(r"\s+", "", str(text).strip().lower()):
            raise UserError(f"{what} {text!r} is not a duration; write e.g. 30m, 2h, 1h30m or 90s")
        seconds = sum(float(n) * {"h": 3600, "m": 60, "s": 1, "": 1}[u] for n, u in parts)
    if seconds <= 0:
        raise UserError(f"{what} {text!r} must be more than zero")
    return seconds


def human_bytes(n: float) -> str:
    for unit, size in (("GB", GIB), ("MB", 2**20), ("KB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def human_seconds(s: float) -> str:
    s = max(0.0, float(s))
    if s < 60:
        return f"{s:.0f}s" if s >= 10 else f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def out_of_memory(exc: BaseException) -> bool:
    """Whether an exception is an allocation that failed (numpy, torch, Python)."""
    return isinstance(exc, MemoryError) or (isinstance(exc, RuntimeError) and (
        "can't allocate memory" in str(exc) or "not enough memory" in str(exc)))


@contextlib.contextmanager
def guard(budget: int) -> Iterator[None]:
    """Hold the process's address space to what it has now plus the budget's remaining room, so
    that an allocation past the budget fails in Python (caught and said in one line by the
    caller) instead of the kernel killing the process. Address space counts memory reserved but
    never touched too, so the guard errs on the side of failing early; it is a net under the
    plan's estimates, not the budget itself. Restored on exit."""
    size, held = _status("VmSize"), rss()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if size is None or not held:
        yield
        return
    limit = size + max(0, budget - held)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        yield
        return
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
