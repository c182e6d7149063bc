"""API-key authentication. Keys live in memory only as sha256 digests; the presented key is hashed
and compared against every stored digest with `hmac.compare_digest` (no early exit), so timing
reveals neither which key matched nor how much of it. The key id used in logs is a digest prefix.
"""

from __future__ import annotations

import hashlib
import hmac

from tachyon.serving.errors import APIError


def key_id_of(digest: str) -> str:
    return "key-" + digest[:10]


class KeyStore:
    """Accepted key digests. Empty store = authentication disabled."""

    def __init__(self, digests: list[str]) -> None:
        self._digests = [d.lower() for d in digests]

    @property
    def enabled(self) -> bool:
        return bool(self._digests)

    def check(self, authorization: str | None) -> str | None:
        """Key id for a valid `Authorization: Bearer <key>` header, None when auth is off; else 401."""
        if not self._digests:
            return None
        token = ""
        if authorization:
            scheme, _, value = authorization.partition(" ")
            if scheme.lower() == "bearer":
                token = value.strip()
        if not token:
            raise APIError(401, "Missing API key: send it as `Authorization: Bearer <key>`.", code="invalid_api_key")
        digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()
        matched = False
        for stored in self._digests:
            matched |= hmac.compare_digest(digest, stored)
        if not matched:
            raise APIError(401, "Incorrect API key provided.", code="invalid_api_key")
        return key_id_of(digest)
