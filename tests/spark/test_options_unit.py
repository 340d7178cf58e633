"""Option parsing of the source and sink: Kafka's names, clear errors, unknown options rejected."""

from __future__ import annotations

import pytest

from tidemq.spark.options import SINK_OPTIONS, SOURCE_OPTIONS, OptionError, SinkOptions, SourceOptions

NS = {"namesrv": "127.0.0.1:9876"}


def _parse(**options: str) -> SourceOptions:
    return SourceOptions.parse({k.lower(): v for k, v in {**NS, **options}.items()})


def test_misspelt_option_is_an_error_listing_the_valid_ones() -> None:
    with pytest.raises(OptionError) as err:
        _parse(subscribe="A", startingOffset="earliest")
    text = str(err.value)
    assert "startingoffset" in text
    for name in SOURCE_OPTIONS:
        assert name in text
    with pytest.raises(OptionError, match="Valid options: " + ", ".join(SINK_OPTIONS)):
        SinkOptions.parse({**NS, "topic": "A", "sendtimeot": "3"})


@pytest.mark.parametrize(
    "options",
    [{}, {"subscribe": "A", "subscribePattern": "A.*"}, {"subscribe": "A", "assign": '{"A": [0]}'}],
)
def test_exactly_one_of_subscribe_pattern_assign(options: dict[str, str]) -> None:
    with pytest.raises(OptionError, match="exactly one of the options subscribe"):
        _parse(**options)


def test_subscribe_topic_alias_and_lists() -> None:
    assert _parse(subscribe="A, B,A").topics == ("A", "B")
    assert _parse(topic="A").topics == ("A",)
    with pytest.raises(OptionError, match="same"):
        _parse(topic="A", subscribe="B")


def test_assign_and_pattern() -> None:
    opts = _parse(assign='{"A": [0, 2], "B": ["broker-a:1"]}')
    assert opts.assign == (("A", 0), ("A", 2), ("B", "broker-a:1"))
    for bad, needle in [
        ("[0]", "JSON object"),
        ('{"A": []}', "non-empty list"),
        ('{"A": [-1]}', "neither a queue id"),
        ('{"A": ["x"]}', "neither a queue id"),
        ("{nope", "not valid JSON"),
    ]:
        with pytest.raises(OptionError, match=needle):
            _parse(assign=bad)
    assert _parse(subscribePattern="Orders-.*").pattern == "Orders-.*"
    with pytest.raises(OptionError, match="not a valid regex"):
        _parse(subscribePattern="(")


def test_offsets_timestamps_and_triggers() -> None:
    opts = _parse(
        subscribe="A",
        startingOffsets="EARLIEST",
        startingTimestamp="1700000000000",
        endingOffsetsByTimestamp='{"A": {"broker-a:0": 1700000000001}}',
        maxOffsetsPerTrigger="100",
        minOffsetsPerTrigger="10",
        maxTriggerDelay="30s",
        includeHeaders="false",
    )
    assert opts.starting_offsets == "earliest" and opts.starting_timestamp == 1_700_000_000_000
    assert opts.ending_by_timestamp == '{"A":{"broker-a:0":1700000000001}}'
    assert (opts.max_offsets_per_trigger, opts.min_offsets_per_trigger) == (100, 10)
    assert opts.max_trigger_delay_ms == 30_000 and opts.include_headers is False
    assert _parse(subscribe="A").max_trigger_delay_ms == 15 * 60_000  # Kafka's default
    assert _parse(subscribe="A", maxTriggerDelay="250").max_trigger_delay_ms == 250
    for options, needle in [
        ({"startingOffsets": "yesterday"}, "startingOffsets must be"),
        ({"endingOffsets": "earliest"}, "endingOffsets cannot be earliest"),
        ({"startingOffsets": "group"}, "needs the option group"),
        ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"}, "must not exceed"),
        ({"maxTriggerDelay": "soon"}, "duration"),
        ({"startingTimestamp": "-5"}, ">= 0"),
        ({"endingTimestamp": "x"}, "integer"),
        ({"failOnDataLoss": "maybe"}, "true or false"),
        ({"startingOffsetsByTimestamp": "[1]"}, "JSON object"),
    ]:
        with pytest.raises(OptionError, match=needle):
            _parse(subscribe="A", **options)


def test_ending_options_are_batch_only() -> None:
    _parse(subscribe="A").check_streaming()
    for options in ({"endingOffsets": "latest"}, {"endingTimestamp": "1"}):
        with pytest.raises(OptionError, match="batch queries only"):
            _parse(subscribe="A", **options).check_streaming()
