"""Timer messages due at any time, on disk: timer log + time wheel (RocketMQ 5's ``store/timer``).

:class:`TimerMessageStore` (``timer_store.py``) moves messages parked in ``rmq_sys_wheel_timer``
into :class:`TimerLog` records (``timer_log.py``) linked per :class:`TimerWheel` slot (``wheel.py``)
and puts each back to its real topic when due.
"""

from tidemq.store.timer.timer_log import TimerLog, TimerRecord
from tidemq.store.timer.timer_store import TIMER_TOPIC, TimerMessageStore, convert_message
from tidemq.store.timer.wheel import Slot, TimerWheel

__all__ = [
    "TIMER_TOPIC",
    "Slot",
    "TimerLog",
    "TimerMessageStore",
    "TimerRecord",
    "TimerWheel",
    "convert_message",
]
