"""Fixtures of the client tests (shared with the kit's tests)."""

from tests.support.client_fixtures import anyio_backend, broker, consents, data, http

__all__ = ["anyio_backend", "broker", "consents", "data", "http"]
