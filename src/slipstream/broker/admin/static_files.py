"""The web console's files (HTML, CSS, JS of our own), served from package data.

The set of servable files is fixed when the listener starts: the names found in the
``console`` package directory, read into memory. A request path is looked up in that
table as a plain name, so ``..``, absolute paths or encoded slashes can only miss (404).
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

CONSOLE_PREFIX = "/console/"
INDEX = "index.html"

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}


# The pages show what clients wrote (record keys, values, member ids): the script sets it
# as text, and the policy allows only the console's own script and styles, no framing.
CONSOLE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
}


@dataclass(frozen=True)
class StaticFile:
    body: bytes
    content_type: str


def load_console_files() -> dict[str, StaticFile]:
    files: dict[str, StaticFile] = {}
    root = resources.files(__package__).joinpath("console")
    for entry in root.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            files[entry.name] = StaticFile(entry.read_bytes(), _TYPES[suffix])
    return files


def lookup(files: dict[str, StaticFile], path: str) -> StaticFile | None:
    """The file for ``/`` or ``/console/<name>``; None for anything else."""
    if path in ("/", "/console", "/console/"):
        return files.get(INDEX)
    if not path.startswith(CONSOLE_PREFIX):
        return None
    name = path[len(CONSOLE_PREFIX) :]
    if not name or "/" in name or "\\" in name or name.startswith("."):
        return None
    return files.get(name)
