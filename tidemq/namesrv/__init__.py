"""tidemq.namesrv."""
