"""Topic attributes (RocketMQ 5): ``mqadmin updateTopic -a +message.type=FIFO,-cleanup.policy``.

Mirrors ``AttributeParser`` (the ``+key=value,-key`` text of the ``attributes`` header field of
UPDATE_AND_CREATE_TOPIC) and ``AttributeUtil.alterCurrentAttributes`` with ``TopicAttributes.ALL``
(which keys exist, which values each takes, which may change after creation). Pure code.
"""

from __future__ import annotations

__all__ = ["TOPIC_ATTRIBUTES", "alter_attributes", "attributes_to_string", "parse_attributes"]

TOPIC_ATTRIBUTES: dict[str, tuple[bool, frozenset[str] | None]] = {
    "queue.type": (False, frozenset({"BatchCQ", "SimpleCQ"})),
    "cleanup.policy": (False, frozenset({"DELETE", "COMPACTION"})),
    "message.type": (True, frozenset({"NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"})),
    "reserve.time": (True, None),  # a long >= -1
}
"""``name -> (changeable after creation, allowed values or None for a number >= -1)``."""


def parse_attributes(text: str | None) -> dict[str, str]:
    """``"+a=b,+c=d,-e"`` -> ``{"+a": "b", "+c": "d", "-e": ""}`` (``parseToMap``).

    Raises:
        ValueError: an entry without ``+`` that sets a value, without ``-`` that deletes, or a key
            given twice; the message names it.
    """
    out: dict[str, str] = {}
    if not text:
        return out
    for kv in text.split(","):
        if "=" in kv:
            key, _, value = kv.partition("=")
            if not key.startswith("+") or not value:
                raise ValueError(f"add/alter attribute format is wrong: {kv!r} (use +key=value)")
        else:
            key, value = kv, ""
            if not key.startswith("-"):
                raise ValueError(f"delete attribute format is wrong: {kv!r} (use -key)")
        if key in out:
            raise ValueError(f"key duplication: {key}")
        out[key] = value
    return out


def attributes_to_string(attributes: dict[str, str]) -> str:
    """Inverse of :func:`parse_attributes` (``parseToString``)."""
    return ",".join(k if not v else f"{k}={v}" for k, v in attributes.items())


def alter_attributes(create: bool, current: dict[str, str], change: dict[str, str]) -> dict[str, str]:
    """The topic's attributes after ``change`` (from :func:`parse_attributes`).

    Creating accepts only ``+key``; updating adds/updates ``+key`` and removes ``-key``.

    Raises:
        ValueError: unknown key, a value not allowed, deleting a key the topic lacks, changing an
            unchangeable key (``queue.type``, ``cleanup.policy``) after creation.
    """
    result = dict(current)
    seen: set[str] = set()
    for key, value in change.items():
        sign, name = key[:1], key[1:]
        if not name or "+" in name or "-" in name or sign not in "+-":
            raise ValueError(f"kv string format wrong: {key!r}")
        if name in seen:
            raise ValueError(f"alter duplication key. key: {name}")
        seen.add(name)
        spec = TOPIC_ATTRIBUTES.get(name)
        if spec is None:
            raise ValueError(f"unsupported key: {name} (known: {', '.join(sorted(TOPIC_ATTRIBUTES))})")
        changeable, allowed = spec
        if create and sign != "+":
            raise ValueError(f"only add attribute is supported while creating topic. key: {name}")
        if not create and not changeable:
            raise ValueError(f"attempt to update an unchangeable attribute. key: {name}")
        if sign == "-":
            if name not in current:
                raise ValueError(f"attempt to delete a nonexistent key: {name}")
            result.pop(name)
            continue
        if allowed is not None and value not in allowed:
            raise ValueError(f"value {value!r} of {name} is not one of {', '.join(sorted(allowed))}")
        if allowed is None and not (value.lstrip("-").isdigit() and int(value) >= -1):
            raise ValueError(f"value {value!r} of {name} must be a number >= -1")
        result[name] = value
    return result
