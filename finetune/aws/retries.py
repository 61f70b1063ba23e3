"""Our own bounded retries with backoff for throttling, S3 SlowDown and transient faults.

botocore's clients are built with one attempt each (see ``finetune.aws.session``): retrying is
done here, once, so the number of attempts and the message after the last one are ours (and
tested), and a retry of CreateTrainingJob can be told apart from a real name clash.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from finetune.adaptors import botocore
from finetune.errors import DependencyError

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "RequestThrottledException",
        "ProvisionedThroughputExceededException",
        "SlowDown",
    }
)
# Error codes that mean "slow down or try again", across the services we call.
RETRYABLE_CODES = THROTTLING_CODES | {
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "RequestTimeout",
    "RequestTimeoutException",
    "PriorRequestNotComplete",
}

sleep = time.sleep  # module attribute so tests can count delays instead of waiting


@dataclass(frozen=True)
class Policy:
    """At most ``attempts`` calls; full-jitter exponential backoff capped at ``cap_seconds``."""

    attempts: int = 5
    base_seconds: float = 0.5
    cap_seconds: float = 20.0

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * 2 ** (attempt - 1)))


DEFAULT = Policy()


def error_code(exc: BaseException) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else)."""
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return ""
    return str(response.get("Error", {}).get("Code", ""))


def http_status(exc: BaseException) -> int:
    response = getattr(exc, "response", None)
    if not isinstance(response, dict):
        return 0
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)


def is_transport_error(exc: BaseException) -> bool:
    """Connection reset, timeout, endpoint unreachable: the request may or may not have landed."""
    try:
        bx = botocore.exceptions
    except DependencyError:  # pragma: no cover - boto3 is there whenever AWS is called
        return False
    kinds = (bx.ConnectionError, bx.HTTPClientError, bx.ReadTimeoutError)
    return isinstance(exc, kinds)


def is_retryable(exc: BaseException) -> bool:
    """Worth another attempt: throttled, slow down, a 5xx, or a transport failure."""
    code = error_code(exc)
    if code in RETRYABLE_CODES:
        return True
    if code and http_status(exc) in (429, 500, 502, 503, 504):
        return True
    return is_transport_error(exc)


def note_attempts(exc: BaseException, attempts: int) -> None:
    """Mark ``exc`` with how many calls were made (``finetune_attempts``, which
    aws.errors.translate reads), so the message can say that we did retry."""
    vars(exc)["finetune_attempts"] = attempts


def call(
    fn: Callable[..., Any],
    *args: Any,
    policy: Policy | None = None,
    on_retry: Callable[[int, BaseException], None] | None = None,
    **kwargs: Any,
) -> Any:
    """``fn(*args, **kwargs)``, retried while the failure is retryable and attempts remain.

    The exception that ends the loop carries ``finetune_attempts`` (how many calls were made),
    so the message can say that we did retry.
    """
    policy = policy or DEFAULT
    for attempt in range(1, policy.attempts + 1):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if attempt >= policy.attempts or not is_retryable(exc):
                note_attempts(exc, attempt)
                raise
            if on_retry is not None:
                on_retry(attempt, exc)
            sleep(policy.delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
