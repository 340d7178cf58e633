"""Broker request processors, one module per request family (RocketMQ's ``broker.processor``)."""
