"""An export folder as a zip, produced piece by piece while it is compressed (``zipfile`` writes
to an unseekable stream with data descriptors), for the dashboard's download and the researcher
API alike."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 20


class _Pipe(io.RawIOBase):
    """A write-only stream whose written bytes are collected for the next yield."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:  # type: ignore[override]
        self.parts.append(bytes(data))
        return len(data)

    def take(self) -> bytes:
        """What was written since the last call."""
        out, self.parts = b"".join(self.parts), []
        return out


def zip_stream(folder: Path, prefix: str) -> Iterator[bytes]:
    """The files of ``folder`` as a zip, yielded in pieces as it is compressed."""
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, "w", compression=zipfile.ZIP_DEFLATED) as archive:  # type: ignore[arg-type]
        for path in sorted(folder.iterdir()):
            with path.open("rb") as source, archive.open(f"{prefix}/{path.name}", "w") as target:
                while block := source.read(CHUNK):
                    target.write(block)
                    if (data := pipe.take()):
                        yield data
    yield pipe.take()
