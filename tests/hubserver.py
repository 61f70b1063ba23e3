"""A small stand-in for the Hugging Face hub on 127.0.0.1: the two requests huggingface_hub's
``hf_hub_download`` makes for one file of a model repository -- HEAD for the file's commit,
etag (an LFS file's sha256) and size, then GET for its bytes -- and the 404 with
``X-Error-Code: EntryNotFound`` for a file the repository lacks (timm then tries the next
name). Point ``HF_ENDPOINT`` at :attr:`HubServer.url`."""

from __future__ import annotations

import hashlib
import http.server
import re
import threading

PATH = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<file>[^?]+)")


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def _file(self) -> bytes | None:
        self.server.requests.append((self.command, self.path))
        found = PATH.match(self.path)
        data = self.server.files.get((found["repo"], found["file"])) if found else None
        if data is None:
            self.send_response(404)
            self.send_header("X-Error-Code", "EntryNotFound" if found else "RepoNotFound")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        self.send_response(200)
        commit = hashlib.sha1(found["repo"].encode()).hexdigest()  # nosec: an id, not security
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        return data

    def do_HEAD(self) -> None:
        self._file()

    def do_GET(self) -> None:
        data = self._file()
        if data is not None:
            self.wfile.write(data)


class HubServer:
    """Serves ``files`` ({(repository, file name): bytes}) until :meth:`close`."""

    def __init__(self, files: dict[tuple[str, str], bytes] | None = None) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.files = dict(files or {})  # type: ignore[attr-defined]
        self.httpd.requests = []  # type: ignore[attr-defined]
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def requests(self) -> list[tuple[str, str]]:
        return self.httpd.requests  # type: ignore[attr-defined]

    def put(self, repo: str, name: str, data: bytes) -> None:
        self.httpd.files[(repo, name)] = data  # type: ignore[attr-defined]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
