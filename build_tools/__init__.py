"""Helpers imported by setup.py to find third-party C++ build inputs."""
