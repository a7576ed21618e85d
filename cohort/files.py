"""Writing files so that a crash never leaves half of one: write beside the
destination, then rename over it."""

import os
import tempfile
from pathlib import Path


def write_atomically(path, text):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
