"""Fixtures of the kit's tests: the client tests' own (a broker sharing ``data``, an HTTP server)."""

from tests.support.client_fixtures import anyio_backend, broker, consents, data, http

__all__ = ["anyio_backend", "broker", "consents", "data", "http"]
