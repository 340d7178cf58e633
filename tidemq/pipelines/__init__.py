"""The shipped data pipelines. ``tidemq pipeline flights``: see :mod:`tidemq.pipelines.flights`."""
