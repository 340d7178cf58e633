"""Fault injection against a real tidemq broker: ``python -m bench.chaos``.

Scenarios (issue 10, item 5), each bounded in counts and time, on 127.0.0.1 with ephemeral ports,
every process it starts stopped by pid (also on failure):

* ``crash``  (:mod:`bench.chaos.crash`): SIGKILL the broker at random moments of a send loop
  (SYNC_FLUSH, the tidemq producer and the RocketMQ C++ producer; then ASYNC_FLUSH) and check
  every acknowledged message at its reported offset after restart;
* ``churn``  (:mod:`bench.chaos.churn`): a 3-member consumer group on 8 queues, a random member
  SIGKILLed and replaced every few seconds; nothing lost, duplicates counted, offsets reach max;
* ``files``  (:mod:`bench.chaos.files`): each store file truncated and corrupted in turn, the broker
  restarted on the damaged copy and compared with the undamaged one;
* ``fuzz``   (:mod:`bench.chaos.fuzz`): malformed frames against broker and name server while a
  well-behaved producer and consumer do round trips;
* ``load``   (:mod:`bench.chaos.load`): many connections heartbeating and sending plus many consumer
  groups; RSS and descriptors sampled.

Prints one table and one JSON line; exit status 1 when a scenario fails its checks. The reduced
counts run in CI as ``tests/reliability/test_chaos.py``.
"""
