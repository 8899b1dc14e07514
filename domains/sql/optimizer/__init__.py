"""Optimizer passes over the logical plan, each small and separate."""
