"""The shipped price file: every figure sourced, every unsourced one marked an estimate with its assumption."""

from tierwise.topology.costs import load_prices


def test_every_price_has_a_source_and_estimates_say_so():
    prices = load_prices()
    assert prices
    for key, entry in prices.items():
        assert entry.get("source"), key
        assert isinstance(entry["value"], int | float)
        if entry.get("estimate"):
            assert entry.get("assumption"), key
        else:
            assert "network.csv" in entry["source"] or "hardware-notes" in entry["source"], key  # the shared data
