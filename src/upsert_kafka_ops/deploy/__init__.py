"""Deployment artifacts generated from the package: the Helm chart's values schema."""
