"""Caltech-256 source handling: resumable download, verification, safe extraction."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from finetune.cli import app
from finetune.data import sources
from finetune.data.synth import SynthSpec, generate
from finetune.errors import DataError


class _Server:
    """Serves one blob at /archive.tar with Range support; can cut the first response."""

    def __init__(self, blob: bytes):
        self.blob = blob
        self.cut_after: int | None = None
        self.ranges: list[str | None] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                outer.ranges.append(self.headers.get("Range"))
                start = 0
                if rng := self.headers.get("Range"):
                    start = int(rng.split("=")[1].rstrip("-"))
                body = outer.blob[start:]
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if outer.cut_after is not None:
                    self.wfile.write(body[: outer.cut_after])
                    outer.cut_after = None
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/archive.tar"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def caltech_tar(tmp_path_factory) -> Path:
    """A miniature 256_ObjectCategories.tar: 5 classes + clutter, with the archive's quirks."""
    base = tmp_path_factory.mktemp("caltech")
    root = base / sources.CALTECH256_DIR
    generate(
        root,
        SynthSpec(classes=5, per_class=12, min_side=40, max_side=60, quirks=True, clutter=True),
    )
    tar_path = base / sources.CALTECH256_FILE
    with tarfile.open(tar_path, "w") as tar:
        tar.add(root, arcname=sources.CALTECH256_DIR)
    return tar_path


@pytest.fixture
def server(caltech_tar):
    s = _Server(caltech_tar.read_bytes())
    yield s
    s.close()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_download_resumes_after_a_cut(server, tmp_path, caltech_tar):
    dest = tmp_path / "dl" / sources.CALTECH256_FILE
    server.cut_after = 5000
    with pytest.raises(DataError, match="could not download"):
        sources.download(server.url, dest)
    part = dest.with_name(dest.name + ".part")
    assert part.stat().st_size == 5000 and not dest.exists()
    sources.download(server.url, dest)
    assert server.ranges == [None, "bytes=5000-"]
    assert dest.read_bytes() == caltech_tar.read_bytes() and not part.exists()


def test_offline_error_says_where_to_put_the_archive(tmp_path):
    dest = tmp_path / sources.CALTECH256_FILE
    with pytest.raises(DataError) as err:
        sources.download("http://127.0.0.1:9/archive.tar", dest, timeout=2)
    assert str(dest) in str(err.value) and "--source" in str(err.value)


def test_verification(caltech_tar):
    with pytest.raises(DataError, match="not the published Caltech-256 archive") as err:
        sources.verify_archive(caltech_tar, None, None)
    assert _sha(caltech_tar) in str(err.value)  # the message offers --sha256 <this file's>
    with pytest.raises(DataError, match="not the expected"):
        sources.verify_archive(caltech_tar, "0" * 64, None)
    assert sources.verify_archive(caltech_tar, _sha(caltech_tar), None).sha256 == _sha(caltech_tar)


def _tar_with(tmp_path: Path, member: tarfile.TarInfo, data: bytes = b"x") -> Path:
    path = tmp_path / "evil.tar"
    with tarfile.open(path, "w") as tar:
        member.size = len(data) if member.isfile() else 0
        tar.addfile(member, io.BytesIO(data) if member.isfile() else None)
    return path


@pytest.mark.parametrize("kind", ["dotdot", "symlink-out", "hardlink-out"])
def test_unsafe_archives_are_refused(tmp_path, kind):
    if kind == "dotdot":
        m = tarfile.TarInfo("256_ObjectCategories/../../escape.txt")
    else:
        m = tarfile.TarInfo("256_ObjectCategories/link")
        m.type = tarfile.SYMTYPE if kind == "symlink-out" else tarfile.LNKTYPE
        m.linkname = "/etc/passwd" if kind == "symlink-out" else "../../etc/passwd"
    target = tmp_path / "x" / "out"
    with pytest.raises(DataError, match="unsafe entry"):
        sources.safe_extract(_tar_with(tmp_path, m), target)
    assert not target.exists() and not (tmp_path / "escape.txt").exists()
    assert not list(target.parent.glob("*.tmp"))  # the half-extracted folder is gone


def test_absolute_member_lands_inside_the_target(tmp_path):
    m = tarfile.TarInfo(str(tmp_path / "abs-escape.txt"))
    target = tmp_path / "x" / "out"
    sources.safe_extract(_tar_with(tmp_path, m), target)
    assert not (tmp_path / "abs-escape.txt").exists()
    assert list(target.rglob("abs-escape.txt"))


def test_cli_prepares_caltech_from_url_then_offline(server, caltech_tar, tmp_path):
    runner = CliRunner()
    common = ["--sha256", _sha(caltech_tar), "--out", str(tmp_path / "ds")]
    common += ["--train-per-class", "8", "--resize", "32", "--workers", "1"]
    res = runner.invoke(app, ["prepare", "caltech256", "--source", server.url, *common])
    assert res.exit_code == 0, res.output
    assert "classes  6" in res.output and "train    48 images" in res.output
    server.close()  # offline from here: the cached archive must be enough
    again = ["prepare", "caltech256", *common, "--json", "--exclude-clutter"]
    res = runner.invoke(app, again)
    assert res.exit_code == 3 and "--overwrite" in res.output  # a different dataset (no clutter)
    res = runner.invoke(app, [*again, "--overwrite"])
    assert res.exit_code == 0, res.output
    m = json.loads(res.output)
    assert len(m["classes"]) == 5 and "257.clutter" not in m["classes"]
    assert m["source"]["archive_sha256"] == _sha(caltech_tar)
    assert any(i["path"].endswith("RENAME2") for i in m["ignored"])


def test_cli_caltech_from_extracted_folder(caltech_tar, tmp_path):
    with tarfile.open(caltech_tar) as tar:
        tar.extractall(tmp_path, filter="data")
    res = CliRunner().invoke(
        app,
        [
            "prepare",
            "caltech256",
            "--source",
            str(tmp_path),
            "--out",
            str(tmp_path / "ds"),
            "--train-per-class",
            "8",
            "--resize",
            "32",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "classes  6" in res.output


def test_digests_are_cached_until_the_file_changes(tmp_path):
    f = tmp_path / "a.tar"
    f.write_bytes(b"first")
    calls = []
    first = sources.cached_digests(f, lambda stage, total: calls.append(stage) or (lambda n: None))
    assert sources.cached_digests(f, lambda s, t: calls.append(s) or (lambda n: None)) == first
    assert calls == ["verify"]
    f.write_bytes(b"second, longer")
    assert sources.cached_digests(f).sha256 == hashlib.sha256(b"second, longer").hexdigest()


def _bomb(path: Path, member_mb: int) -> Path:
    """A small .tar.gz whose one member unpacks to ``member_mb`` MB of zeros."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        info = tarfile.TarInfo(f"{sources.CALTECH256_DIR}/001.x/zeros.jpg")
        info.size = member_mb * 2**20
        tar.addfile(info, io.BufferedReader(io.BytesIO(bytes(info.size))))
    return path


def _prepare_archive(archive: Path, tmp_path: Path, *extra: str):
    args = ["prepare", "caltech256", "--source", str(archive), "--sha256", _sha(archive)]
    return CliRunner().invoke(app, [*args, "--out", str(tmp_path / "ds"), *extra])


def test_an_archive_that_unpacks_too_much_is_refused_before_extracting(tmp_path):
    from finetune import settings

    archive = _bomb(tmp_path / "bomb.tar.gz", 150)
    assert archive.stat().st_size < 2 * 2**20
    res = _prepare_archive(archive, tmp_path)
    assert res.exit_code == 3, res.output
    assert "member(s) larger than 100 MB" in res.output and "--max-extract-mb" in res.output
    assert "nothing was extracted" in res.output and "Traceback" not in res.output
    downloads = settings.get().downloads_dir
    assert not downloads.exists() or list(downloads.iterdir()) == []


def test_extract_limits_are_options(caltech_tar, tmp_path):
    res = _prepare_archive(caltech_tar, tmp_path, "--max-extract-gb", "0.0001")
    assert res.exit_code == 3 and "in all, above the 0.1 MB limit" in res.output, res.output
    ok = _prepare_archive(caltech_tar, tmp_path, "--train-per-class", "8", "--resize", "32")
    assert ok.exit_code == 0, ok.output


def _many_empty_entries(tmp_path, n: int, cut: bool) -> Path:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i in range(n):
            tar.addfile(tarfile.TarInfo(f"256_ObjectCategories/001.ak47/e{i:05d}.jpg"))
    data = buf.getvalue()
    path = tmp_path / ("cut.tar.gz" if cut else "many.tar.gz")
    path.write_bytes(data[: len(data) // 2] if cut else data)
    return path


def test_the_entry_limit_is_checked_while_the_headers_are_read(tmp_path):
    """Issue 34, N12: the count is enforced header by header. The proof: an archive cut
    after its first thousand entries is refused for its entries -- the headers past the
    limit, and the cut, are never read (reading them all first met the cut)."""
    limits = sources.ExtractLimits(members=100)
    target = tmp_path / "out"
    for cut in (True, False):
        with pytest.raises(DataError, match="more than 100 entries") as err:
            sources.safe_extract(_many_empty_entries(tmp_path, 3000, cut), target, limits=limits)
        assert "To fix:" in str(err.value)
    assert not target.exists() and not (tmp_path / "out.tmp").exists()


def test_a_cut_archive_is_refused_clearly(tmp_path):
    with pytest.raises(DataError, match="not a readable tar archive"):
        sources.safe_extract(_many_empty_entries(tmp_path, 3000, True), tmp_path / "out")
    assert not (tmp_path / "out").exists()
