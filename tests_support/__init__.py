"""Helpers shared by the repository's pytest suites (server/tests, bindings/python/tests)."""
