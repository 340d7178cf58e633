"""tidemq.broker."""
