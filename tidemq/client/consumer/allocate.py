"""Queue allocation strategies for CLUSTERING consumer groups (pure).

Mirrors RocketMQ's ``AllocateMessageQueueStrategy`` and its implementations in
``org.apache.rocketmq.client.consumer.rebalance``. Every member of a group runs the same
strategy over the same sorted inputs, so each member computes its own share without talking
to the others; the results must match the Java implementations exactly, because tidemq
consumers share groups with Java and C++ consumers.

Rule: ``allocate`` sorts its inputs first (queues by topic, broker name, queue id; client ids
by string order), exactly as ``RebalanceImpl.rebalanceByTopic`` does before calling the Java
strategy, so the answer never depends on the order the caller passes them in.
"""

from __future__ import annotations

import bisect
import hashlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence

from tidemq.errors import ClientError
from tidemq.protocol.message import MessageQueue

__all__ = [
    "AllocateMachineRoomNearby",
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "md5_hash",
]

_RoomResolver = Callable[[MessageQueue], str]
_ClientRoomResolver = Callable[[str], str]


class AllocateMessageQueueStrategy(ABC):
    """Decides which queues of a topic one member of a group consumes.

    Mirrors ``AllocateMessageQueueStrategy``. Subclasses implement :meth:`_allocate` over sorted
    inputs; :meth:`allocate` validates and sorts (Java's ``AbstractAllocateMessageQueueStrategy.check``).
    """

    name: str = ""

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Iterable[MessageQueue],
        cid_all: Iterable[str],
    ) -> list[MessageQueue]:
        """Return the queues ``current_cid`` owns, in ``mq_all`` order.

        Args:
            consumer_group: the group (informational, as in Java).
            current_cid: this client's id.
            mq_all: every queue of the topic (any order).
            cid_all: every client id of the group (any order).

        Returns:
            The allocated queues; empty when ``current_cid`` is not in ``cid_all``.

        Raises:
            ClientError: ``current_cid`` is empty, or ``mq_all`` / ``cid_all`` is empty.
        """
        if not current_cid:
            raise ClientError("allocate: current client id is empty")
        mqs = sorted(set(mq_all))
        cids = sorted(set(cid_all))
        if not mqs:
            raise ClientError(f"allocate: no message queues for group {consumer_group}")
        if not cids:
            raise ClientError(f"allocate: no client ids for group {consumer_group}")
        if current_cid not in cids:
            return []
        return self._allocate(consumer_group, current_cid, mqs, cids)

    @abstractmethod
    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        """Strategy body over validated, sorted, de-duplicated inputs."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AllocateMessageQueueAveragely(AllocateMessageQueueStrategy):
    """Contiguous ranges, the first ``n % c`` clients getting one extra. Mirrors ``AllocateMessageQueueAveragely`` (``AVG``).

    Example: 8 queues, 3 clients -> ``[0, 1, 2]``, ``[3, 4, 5]``, ``[6, 7]``.
    """

    name = "AVG"

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        n, c = len(mq_all), len(cid_all)
        index = cid_all.index(current_cid)
        mod = n % c
        if n <= c:
            average = 1
        elif mod > 0 and index < mod:
            average = n // c + 1
        else:
            average = n // c
        start = index * average if (mod > 0 and index < mod) else index * average + mod
        count = min(average, n - start)
        return [mq_all[(start + k) % n] for k in range(count)]


class AllocateMessageQueueAveragelyByCircle(AllocateMessageQueueStrategy):
    """Queue ``j`` goes to client ``j % c``. Mirrors ``AllocateMessageQueueAveragelyByCircle`` (``AVG_BY_CIRCLE``)."""

    name = "AVG_BY_CIRCLE"

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        index = cid_all.index(current_cid)
        return [mq for j, mq in enumerate(mq_all) if j % len(cid_all) == index]


class AllocateMessageQueueByConfig(AllocateMessageQueueStrategy):
    """A fixed, user-chosen list regardless of the group. Mirrors ``AllocateMessageQueueByConfig`` (``CONFIG``).

    Args:
        message_queue_list: the queues this client consumes.
    """

    name = "CONFIG"

    def __init__(self, message_queue_list: Sequence[MessageQueue]) -> None:
        self.message_queue_list = list(message_queue_list)

    def allocate(
        self,
        consumer_group: str,
        current_cid: str,
        mq_all: Iterable[MessageQueue],
        cid_all: Iterable[str],
    ) -> list[MessageQueue]:
        """Return the configured list (Java does no checks here either)."""
        return list(self.message_queue_list)

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        return list(self.message_queue_list)


class AllocateMessageQueueByMachineRoom(AllocateMessageQueueStrategy):
    """Queues of brokers named ``room@name`` in the consumer's rooms, split in blocks.

    Mirrors ``AllocateMessageQueueByMachineRoom`` (``MACHINE_ROOM``): of the queues whose broker
    name is ``<room>@<name>`` with ``room`` in ``consumer_idcs``, client ``i`` takes
    ``premq[mod*i : mod*i+mod]`` (``mod = len(premq) // c``) plus ``premq[i + mod*c]`` when
    ``len(premq) % c > i``.

    Args:
        consumer_idcs: the machine rooms this client consumes from.
    """

    name = "MACHINE_ROOM"

    def __init__(self, consumer_idcs: Iterable[str]) -> None:
        self.consumer_idcs = set(consumer_idcs)

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        index = cid_all.index(current_cid)
        premq = [mq for mq in mq_all if _room_of(mq.broker_name) in self.consumer_idcs]
        mod, rem = divmod(len(premq), len(cid_all))
        result = premq[mod * index : mod * index + mod]
        if rem > index:
            result.append(premq[index + mod * len(cid_all)])
        return result


def _room_of(broker_name: str) -> str | None:
    parts = broker_name.split("@")
    return parts[0] if len(parts) == 2 else None


class AllocateMachineRoomNearby(AllocateMessageQueueStrategy):
    """Prefer consumers in the queue's own machine room. Mirrors ``AllocateMachineRoomNearby``.

    Args:
        inner: the strategy used inside each room.
        room_of_queue: machine room of a queue (e.g. parsed from its broker name).
        room_of_client: machine room of a client id.
    """

    def __init__(
        self,
        inner: AllocateMessageQueueStrategy,
        room_of_queue: _RoomResolver,
        room_of_client: _ClientRoomResolver,
    ) -> None:
        self.inner = inner
        self.room_of_queue = room_of_queue
        self.room_of_client = room_of_client
        self.name = f"MACHINE_ROOM_NEARBY-{inner.name}"

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        mqs_by_room: dict[str, list[MessageQueue]] = {}
        for mq in mq_all:
            mqs_by_room.setdefault(self.room_of_queue(mq), []).append(mq)
        cids_by_room: dict[str, list[str]] = {}
        for cid in cid_all:
            cids_by_room.setdefault(self.room_of_client(cid), []).append(cid)
        result: list[MessageQueue] = []
        my_room = self.room_of_client(current_cid)
        if mqs_by_room.get(my_room) and my_room in cids_by_room:
            result += self.inner.allocate(
                consumer_group, current_cid, mqs_by_room[my_room], cids_by_room[my_room]
            )
        for room, mqs in sorted(mqs_by_room.items()):
            if room != my_room and room not in cids_by_room:
                result += self.inner.allocate(consumer_group, current_cid, mqs, cid_all)
        return result


class AllocateMessageQueueConsistentHash(AllocateMessageQueueStrategy):
    """Consistent hashing on an MD5 ring. Mirrors ``AllocateMessageQueueConsistentHash`` (``CONSISTENT_HASH``).

    Each client contributes ``virtual_node_cnt`` virtual nodes keyed ``"<clientId>-<k>"``; a queue
    goes to the first virtual node whose hash is >= the hash of ``str(mq)`` (Java's
    ``MessageQueue.toString()``), wrapping to the first node. Hash = first 4 bytes of the MD5
    digest, big-endian, unsigned (``ConsistentHashRouter.MD5Hash``).

    Args:
        virtual_node_cnt: virtual nodes per client (default 10; must be >= 0).
    """

    name = "CONSISTENT_HASH"

    def __init__(self, virtual_node_cnt: int = 10) -> None:
        if virtual_node_cnt < 0:
            raise ClientError(f"virtual_node_cnt must be >= 0, got {virtual_node_cnt}")
        self.virtual_node_cnt = virtual_node_cnt

    def _allocate(
        self, consumer_group: str, current_cid: str, mq_all: list[MessageQueue], cid_all: list[str]
    ) -> list[MessageQueue]:
        ring: dict[int, str] = {}
        for cid in cid_all:  # later puts overwrite earlier ones on a hash collision, as in a TreeMap
            for k in range(self.virtual_node_cnt):
                ring[md5_hash(f"{cid}-{k}")] = cid
        if not ring:
            return []
        keys = sorted(ring)
        result = []
        for mq in mq_all:
            pos = bisect.bisect_left(keys, md5_hash(str(mq)))
            node = ring[keys[pos if pos < len(keys) else 0]]
            if node == current_cid:
                result.append(mq)
        return result


def md5_hash(key: str) -> int:
    """First 4 bytes of MD5(``key`` as UTF-8) as an unsigned big-endian int (``ConsistentHashRouter.MD5Hash``)."""
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "big")
