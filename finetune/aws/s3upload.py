"""Prepared datasets to S3 under a content-addressed prefix, uploaded once.

    s3://BUCKET/finetune/datasets/NAME-HASH/train/       NAME_train.rec .idx manifest.json
    s3://BUCKET/finetune/datasets/NAME-HASH/validation/  NAME_val.rec   .idx manifest.json

HASH is a short sha256 over the manifest's checksums of those files (and the class list), so
the same bytes always land under the same prefix and a changed dataset under a new one. Every
object goes up with a SHA256 checksum S3 verifies and keeps (large files in parts, each with
its own); an object already there is skipped only when S3's own checksum (HeadObject with
ChecksumMode) is the file's -- never by metadata, which whoever wrote the object chose. The
trainer checks the files again against the planned manifest (finetune.train.dataset).
Prefixes always end with "/": without it, s3://b/x/shapes-1 would also match s3://b/x/shapes-10/.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from finetune.aws import retries
from finetune.aws.errors import aws_errors
from finetune.data import manifest as mf
from finetune.data.channels import CHANNELS, channel_files
from finetune.data.manifest import MANIFEST
from finetune.errors import DataError, UsageError

DATASETS_ROOT = "finetune/datasets/"
PART_SIZE = 64 * 1024 * 1024  # S3 needs >= 5 MiB for every part but the last
SHA_META = "sha256"  # x-amz-meta-sha256: hex digest of the whole object (informative only)

Progress = Callable[[int], None]


@dataclass(frozen=True)
class UploadFile:
    local: Path
    key: str
    sha256: str
    size: int


@dataclass(frozen=True)
class DatasetUpload:
    """Where a prepared dataset goes in S3 and which files make it up."""

    bucket: str
    prefix: str  # key prefix, ends with "/"
    files: tuple[UploadFile, ...]

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    @property
    def channels(self) -> dict[str, str]:
        """Channel name -> S3 prefix URI (ending in "/")."""
        return {c: f"{self.uri}{c}/" for c in CHANNELS}

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)


@dataclass
class UploadResult:
    uploaded: list[str]
    skipped: list[str]
    bytes_sent: int


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """'s3://bucket/key/prefix' -> ('bucket', 'key/prefix')."""
    if not uri.startswith("s3://") or len(uri) <= 5 or uri[5] == "/":
        raise UsageError(f"{uri!r} is not an S3 URI", "write it as s3://BUCKET/PREFIX/.")
    bucket, _, key = uri[5:].partition("/")
    return bucket, key


def as_prefix(key: str) -> str:
    """A key prefix that matches only what is inside it: always ends with '/'."""
    return key if key.endswith("/") or not key else key + "/"


def content_hash(manifest, files: dict[str, str]) -> str:
    """12 hex digits over (channel/name, sha256) of the data files and the class list."""
    lines = [f"{key} {sha}" for key, sha in sorted(files.items())]
    lines.append("classes " + json.dumps(list(manifest.classes)))
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def plan_upload(dataset_dir: str | Path, bucket: str) -> DatasetUpload:
    """The upload for a prepared dataset folder, from its manifest alone (no network)."""
    directory = Path(dataset_dir)
    m = mf.load(directory)
    data: dict[str, str] = {}
    entries: list[tuple[str, str, Path]] = []
    with_test = "test" in m.splits and m.splits["test"].count > 0
    for channel, split in CHANNELS.items():
        for name in channel_files(m.name, split, with_test):
            if name == MANIFEST:
                sha = mf.sha256_file(directory / name)
            elif name in m.files:
                sha = m.files[name].sha256
                data[f"{channel}/{name}"] = sha
            else:
                raise DataError(
                    f"{directory} has no {name} in its manifest",
                    "re-run `finetune prepare` for this dataset (it needs a validation split).",
                )
            entries.append((f"{channel}/{name}", sha, directory / name))
    prefix = f"{DATASETS_ROOT}{m.name}-{content_hash(m, data)}/"
    files = tuple(
        UploadFile(local=path, key=prefix + rel, sha256=sha, size=path.stat().st_size)
        for rel, sha, path in entries
    )
    return DatasetUpload(bucket=bucket, prefix=prefix, files=files)


def upload_dataset(
    s3, upload: DatasetUpload, progress: Progress | None = None, part_size: int = PART_SIZE
) -> UploadResult:
    """Upload what is not in S3 yet; ``progress(n)`` is called with bytes done (sent or
    skipped). A file that no longer matches its manifest checksum is a DataError."""
    progress = progress or (lambda n: None)
    result = UploadResult([], [], 0)
    for f in upload.files:
        with aws_errors("HeadObject", resource=f"s3://{upload.bucket}/{f.key}"):
            present = _present(s3, upload.bucket, f, part_size)
        if present:
            result.skipped.append(f.key)
            progress(f.size)
            continue
        with aws_errors("PutObject", resource=f"s3://{upload.bucket}/{f.key}"):
            if f.size <= part_size:
                _put_small(s3, upload.bucket, f)
                progress(f.size)
            else:
                _put_multipart(s3, upload.bucket, f, part_size, progress)
        result.uploaded.append(f.key)
        result.bytes_sent += f.size
    return result


def _present(s3, bucket: str, f: UploadFile, part_size: int) -> bool:
    """Whether the object holds the file's bytes, by the checksum S3 computed and verified
    when it was written. An object without one (written without a checksum) is replaced."""
    try:
        head = retries.call(s3.head_object, Bucket=bucket, Key=f.key, ChecksumMode="ENABLED")
    except Exception as exc:
        if retries.error_code(exc) in ("404", "NoSuchKey", "NotFound"):
            return False
        raise
    stored = head.get("ChecksumSHA256")
    if not stored or head["ContentLength"] != f.size:
        return False
    value, _, parts = stored.partition("-")
    if value == _b64(bytes.fromhex(f.sha256)) and not parts:  # a whole-object checksum
        return True
    if f.size <= part_size:
        return False
    if not parts:  # moto (5.2.5) keeps a multipart object's checksum without its "-N"
        return value == _composite(f, part_size)
    # a multipart object: S3 keeps sha256 over the parts' sha256s, "-N" for N parts; only the
    # same part size gives the same value (another part size means one more upload)
    return value == _composite(f, part_size) and int(parts) == -(-f.size // part_size)


def _composite(f: UploadFile, part_size: int) -> str:
    """S3's multipart checksum of the local file cut in ``part_size`` parts (and the file
    checked against its manifest on the way)."""
    whole, digests = hashlib.sha256(), b""
    with open(f.local, "rb") as fh:
        while chunk := fh.read(part_size):
            whole.update(chunk)
            digests += hashlib.sha256(chunk).digest()
    _check(f, whole.hexdigest())
    return _b64(hashlib.sha256(digests).digest())


def _b64(digest: bytes) -> str:
    return base64.b64encode(digest).decode()


def _check(f: UploadFile, actual: str) -> None:
    if actual != f.sha256:
        raise DataError(
            f"{f.local} changed since it was prepared (its sha256 differs from the manifest)",
            "re-run `finetune prepare` for this dataset, then launch again.",
        )


def _put_small(s3, bucket: str, f: UploadFile) -> None:
    body = f.local.read_bytes()
    digest = hashlib.sha256(body).digest()
    _check(f, digest.hex())
    retries.call(
        s3.put_object,
        Bucket=bucket,
        Key=f.key,
        Body=body,
        ChecksumAlgorithm="SHA256",  # S3 keeps the checksum (HeadObject ChecksumMode shows it)
        ChecksumSHA256=_b64(digest),
        Metadata={SHA_META: f.sha256},
    )


def _put_multipart(s3, bucket: str, f: UploadFile, part_size: int, progress: Progress) -> None:
    """Parts with SHA256 checksums; aborted on any failure so no orphan parts are billed."""
    mpu = retries.call(
        s3.create_multipart_upload,
        Bucket=bucket,
        Key=f.key,
        ChecksumAlgorithm="SHA256",
        Metadata={SHA_META: f.sha256},
    )
    parts: list[dict[str, Any]] = []
    upload_id, whole = mpu["UploadId"], hashlib.sha256()
    try:
        with open(f.local, "rb") as fh:
            while chunk := fh.read(part_size):
                whole.update(chunk)
                parts.append(_put_part(s3, bucket, f.key, upload_id, len(parts) + 1, chunk))
                progress(len(chunk))
        _check(f, whole.hexdigest())
        retries.call(
            s3.complete_multipart_upload,
            Bucket=bucket,
            Key=f.key,
            UploadId=upload_id,
            MultipartUpload={"Parts": parts},
        )
    except BaseException:
        _abort(s3, bucket, f.key, upload_id)
        raise


def _put_part(s3, bucket: str, key: str, upload_id: str, number: int, chunk: bytes) -> dict:
    checksum = _b64(hashlib.sha256(chunk).digest())
    response = retries.call(
        s3.upload_part,
        Bucket=bucket,
        Key=key,
        UploadId=upload_id,
        PartNumber=number,
        Body=chunk,
        ChecksumAlgorithm="SHA256",
        ChecksumSHA256=checksum,
    )
    return {"PartNumber": number, "ETag": response["ETag"], "ChecksumSHA256": checksum}


def _abort(s3, bucket: str, key: str, upload_id: str) -> None:
    # best effort: the bucket's lifecycle rule aborts forgotten uploads after a day anyway
    with contextlib.suppress(Exception):
        s3.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)


def list_prefix(s3, bucket: str, prefix: str) -> dict[str, int]:
    """Key -> size of every object under ``prefix`` (which must end with '/')."""
    out: dict[str, int] = {}
    token = None
    while True:
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": as_prefix(prefix)}
        if token:
            kwargs["ContinuationToken"] = token
        page = retries.call(s3.list_objects_v2, **kwargs)
        out.update({o["Key"]: o["Size"] for o in page.get("Contents", [])})
        token = page.get("NextContinuationToken")
        if not page.get("IsTruncated") or not token:
            return out
