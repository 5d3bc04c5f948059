"""Helpers shared by the tests of several layers: worlds, served apps, proxies."""
