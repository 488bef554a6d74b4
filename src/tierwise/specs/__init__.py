"""Frozen, typed specs (accelerator, cluster, model, plan) and their loading from the catalog or files."""
