"""Shared test helpers (servers for the distributed tests); not collected as tests."""
