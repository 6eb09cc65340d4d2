"""Reading JSON that anyone may have written: bounded in size and nesting, one-line errors.

Run manifests, transcript indexes and attack results are inputs a user may have been handed.
Reading one never executes anything (it is JSON), and here it also cannot exhaust memory or the
interpreter's stack: a file over `MAX_BYTES` or nested too deeply is refused in one line, as
are a missing file and text that is not JSON. No heavy import, so the CLI stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fedattack.registry import UserError

MAX_BYTES = 512 * 2**20  # far above any manifest, index, metrics or result file fedattack writes


def read_json(path: Path, missing: str, corrupt: str, max_bytes: int | None = None) -> Any:
    """The file's JSON; `missing` and `corrupt` say what to do when it is absent or not JSON;
    `max_bytes` (default `MAX_BYTES`) bounds its size."""
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    try:
        if path.stat().st_size > max_bytes:
            raise UserError(f"{path} is larger than {max_bytes >> 20} MiB; it is not a file fedattack wrote")
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path} is missing; {missing}") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise UserError(f"{path} is not valid JSON; {corrupt}") from None
    except RecursionError:
        raise UserError(f"{path} is nested too deeply to be a file fedattack wrote") from None
