"""tidemq.admin."""
