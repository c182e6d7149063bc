"""Small file helpers shared by the layers (no tachyon imports)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary sibling renamed into place, so a concurrent reader sees the old
    file or the new one, never half of it. The caller creates the folder; OSError propagates (the temporary file
    is removed first)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
