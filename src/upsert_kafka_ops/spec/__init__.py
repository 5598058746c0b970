"""Specifications: tables, connections, types, Flink DDL."""

from __future__ import annotations
