"""tidemq.client."""
