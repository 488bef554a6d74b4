"""Cost of collectives on the tiers a group of ranks spans (see docs/architecture.md)."""
