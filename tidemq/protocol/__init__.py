"""tidemq.protocol."""
