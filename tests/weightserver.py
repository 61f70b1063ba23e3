"""A file server on 127.0.0.1 for weight downloads: files under /models/, a dropped link (the
announced length, then the connection closes: ``cut``), a redirect (``move``), and the GETs
it answered (``gets``)."""

from __future__ import annotations

import http.server
import threading


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._answer(body=False)

    def do_GET(self) -> None:
        self.server.gets.append(self.path)
        self._answer(body=True)

    def _answer(self, body: bool) -> None:
        if self.path in self.server.moved:
            self.send_response(302)
            self.send_header("Location", self.server.moved[self.path])
            self.end_headers()
            return
        data = self.server.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data[: self.server.cut.get(self.path, len(data))])


class WeightServer:
    def __init__(self) -> None:
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.files, self.httpd.cut, self.httpd.moved, self.httpd.gets = {}, {}, {}, []
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def gets(self) -> list[str]:
        return self.httpd.gets

    def put(self, name: str, data: bytes, cut: int | None = None) -> str:
        """Serve ``data`` as /models/NAME (``cut``: only that many bytes reach the client)."""
        self.httpd.files[f"/models/{name}"] = data
        if cut is not None:
            self.httpd.cut[f"/models/{name}"] = cut
        return f"{self.base}/models/{name}"

    def move(self, name: str, location: str) -> str:
        """/models/NAME answers with a redirect to ``location``."""
        self.httpd.moved[f"/models/{name}"] = location
        return f"{self.base}/models/{name}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
