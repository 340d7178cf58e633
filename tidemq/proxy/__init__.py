"""The RocketMQ 5 gRPC endpoint: ``apache.rocketmq.v2.MessagingService`` in front of tidemq brokers.

Mirrors RocketMQ 5's proxy (``org.apache.rocketmq.proxy``): the gRPC activities turn each v5 RPC
into the broker's remoting requests (send, POP, ack, end transaction...), run in-process against
the broker in local mode (``tidemq serve --grpc-port``) or over remoting to every broker of a
cluster (``tidemq proxy --namesrv``). See ``docs/rocketmq5.md``.

Modules: ``pb`` (the generated apache.rocketmq.v2 modules shipped by ``rocketmq-python-client``),
``codes`` (status codes and errors), ``names`` (namespaces), ``auth`` (MQv2-HMAC-SHA1),
``convert`` (messages both ways), ``settings`` (Telemetry settings), ``route`` (QueryRoute /
QueryAssignment), ``backend`` / ``local`` / ``cluster`` (where requests go), ``producer`` /
``consumer`` / ``transaction`` / ``renew`` / ``dlq`` / ``cluster_pop`` (the activities),
``channels`` (clients and their Telemetry streams), ``service`` (the servicer), ``server``
(the grpc.aio server), ``cli`` (``tidemq proxy``, ``tidemq serve --grpc-*``).

Nothing here imports grpcio or the generated modules: ``tidemq.proxy.cli`` is imported by every
``tidemq`` command, the rest only when the endpoint starts (``from tidemq.proxy.server import
GrpcProxy``).
"""
