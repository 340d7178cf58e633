"""The send processor's properties: header text + CLUSTER, minus WAIT, written as text."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tidemq.broker.processor.send import SendMessageProcessor
from tidemq.protocol.message import properties_to_string, string_to_properties

_PIECES = st.sampled_from(
    ["WAIT", "CLUSTER", "TAGS", "UNIQ_KEY", "K", "", "\x01", "\x02", "true", "v", "\u00e9"]
)


def _processor() -> SendMessageProcessor:
    broker: Any = SimpleNamespace(config=SimpleNamespace(broker_cluster_name="DefaultCluster"))
    return SendMessageProcessor(broker)


@given(st.one_of(st.none(), st.lists(_PIECES, max_size=12).map("".join)))
def test_properties_text_is_what_the_dict_writes(text: str | None) -> None:
    """Whatever the header holds (repeated names, empty pairs, stray separators, WAIT, CLUSTER), the
    text is the properties dict written out, and the dict is the header's + CLUSTER - WAIT."""
    props, wait, stored = _processor().properties_of(text)
    expected = string_to_properties(text or "")
    expected_wait = expected.pop("WAIT", "true").lower() != "false"
    expected["CLUSTER"] = "DefaultCluster"
    assert props == expected and list(props) == list(expected)
    assert wait == expected_wait
    assert stored == properties_to_string(expected)


def test_a_clients_properties_keep_their_text() -> None:
    _, wait, stored = _processor().properties_of("UNIQ_KEY\x01AB12\x02TAGS\x01t")
    assert wait and stored == "UNIQ_KEY\x01AB12\x02TAGS\x01t\x02CLUSTER\x01DefaultCluster"
