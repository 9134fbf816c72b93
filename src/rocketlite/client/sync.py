"""Blocking wrappers around the asyncio client, for code that has no event loop.

Each wrapper object owns one daemon thread running its own event loop; the async client lives
there and every call is forwarded with ``asyncio.run_coroutine_threadsafe(...).result(timeout)``.
Errors are re-raised as the async client raised them (``MQClientError``, ``MQBrokerError``); a call
that gets no answer within its timeout (the operation's own timeout + 5 s) raises ``MQClientError``,
as does any call after ``shutdown()``, which stops and joins the loop thread::

    from rocketlite.client import ConsumeStatus, Message
    from rocketlite.client.sync import SyncProducer, SyncPushConsumer

    with SyncProducer("PG", namesrv_addr="127.0.0.1:9876") as producer:
        result = producer.send(Message("TopicA", b"hello"))
        future = producer.send_async(Message("TopicA", b"later"))  # a concurrent.futures.Future
        future.result()

    def handle(msgs):  # runs in a thread pool of consume_concurrency threads; may block
        for m in msgs:
            print(m.body)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = SyncPushConsumer("CG", namesrv_addr="127.0.0.1:9876", consume_concurrency=8)
    consumer.subscribe("TopicA", "*")
    consumer.register_listener(handle)
    consumer.start()
    ...
    consumer.shutdown()

    with SyncSimpleConsumer("CG", namesrv_addr="127.0.0.1:9876",
                            subscriptions={"TopicA": "*"}) as simple:
        for m in simple.receive(16, invisible_duration=30):
            simple.ack(m)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as dt
import threading
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from rocketlite.client.errors import MQClientError
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import MessageQueueSelector, Producer, SendResult
from rocketlite.client.push_consumer import ConsumeStatus, OrderlyStatus, PushConsumer
from rocketlite.client.simple_consumer import Duration, PopMessage, SimpleConsumer
from rocketlite.client.transaction import TransactionListener, TransactionProducer, TransactionSendResult
from rocketlite.protocol.bodies import MessageQueue

T = TypeVar("T")
MARGIN = 5.0
"""Seconds a forwarded call waits beyond the operation's own timeout."""

SyncListener = Callable[[list[MessageExt]], ConsumeStatus | OrderlyStatus | None]


class _LoopThread:
    """An event loop on a daemon thread, and blocking calls into it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"rocketlite-{name}", daemon=True)
        self._closed = False
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
            tasks = asyncio.all_tasks(self._loop)
            for t in tasks:
                t.cancel()
            self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.close()

    @property
    def thread(self) -> threading.Thread:
        """The loop thread (not alive after ``shutdown()``)."""
        return self._thread

    def _call(self, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        if self._closed:
            coro.close()
            raise MQClientError(f"{self._name} is shut down: {what} is not possible any more")
        if threading.current_thread() is self._thread:
            coro.close()
            raise MQClientError(f"{what} called from {self._name}'s own loop thread would deadlock")
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            if fut.done():  # the async side's own TimeoutError
                raise
            fut.cancel()
            raise MQClientError(f"{self._name}: {what} got no answer within {timeout:.1f}s") from None

    def _call_sync(self, fn: Callable[[], T], timeout: float, what: str) -> T:
        async def run() -> T:
            return fn()
        return self._call(run(), timeout, what)

    def _stop(self) -> None:
        self._closed = True
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            if threading.current_thread() is not self._thread:
                self._thread.join()


class SyncProducer(_LoopThread):
    """A blocking ``Producer``; keyword arguments go to ``Producer``."""

    def __init__(self, group: str = "DEFAULT_PRODUCER", **kwargs: Any) -> None:
        super().__init__(f"SyncProducer({group})")
        try:
            self._producer: Producer = self._call_sync(lambda: self._new_producer(group, **kwargs), MARGIN,
                                                       "construct")
        except BaseException:
            self._stop()
            raise
        self._timeout = self._producer.send_timeout + MARGIN
        self._start_timeout = 3 * self._producer.config.request_timeout + MARGIN

    def _new_producer(self, group: str, **kwargs: Any) -> Producer:
        return Producer(group, **kwargs)

    @property
    def producer(self) -> Producer:
        """The async producer (use it only from coroutines run on the loop thread)."""
        return self._producer

    def start(self) -> None:
        self._call(self._producer.start(), self._start_timeout, "start")

    def shutdown(self) -> None:
        """Wait for async sends in flight (up to ``send_timeout``), close, stop the loop thread."""
        if self._closed:
            return
        try:
            self._call(self._producer.shutdown(), self._timeout + self._producer.config.request_timeout,
                       "shutdown")
        finally:
            self._stop()

    def __enter__(self) -> SyncProducer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def send(self, msg: Message, queue: MessageQueue | None = None, *,
             selector: MessageQueueSelector | None = None, arg: Any = None,
             timeout: float | None = None) -> SendResult:
        budget = (self._producer.send_timeout if timeout is None else timeout) + MARGIN
        return self._call(self._producer.send(msg, queue, selector=selector, arg=arg, timeout=timeout),
                          budget, "send")

    def send_batch(self, msgs: Sequence[Message], queue: MessageQueue | None = None, *,
                   timeout: float | None = None) -> SendResult:
        budget = (self._producer.send_timeout if timeout is None else timeout) + MARGIN
        return self._call(self._producer.send_batch(msgs, queue, timeout=timeout), budget, "send_batch")

    def send_oneway(self, msg: Message, queue: MessageQueue | None = None) -> None:
        self._call(self._producer.send_oneway(msg, queue), self._timeout, "send_oneway")

    def send_async(self, msg: Message,
                   callback: Callable[[concurrent.futures.Future[SendResult]], None] | None = None,
                   ) -> concurrent.futures.Future[SendResult]:
        """Start a send; return a ``concurrent.futures.Future`` at once. ``callback(future)`` runs
        when it is done, on the loop thread (keep it short) or at once if it is already done."""
        cf: concurrent.futures.Future[SendResult] = concurrent.futures.Future()

        def launch() -> None:
            self._producer.send_async(msg).add_done_callback(lambda f: _copy(f, cf))

        self._call_sync(launch, self._timeout, "send_async")
        if callback is not None:
            cf.add_done_callback(callback)
        return cf

    def flush(self) -> None:
        """Wait until every async send has completed."""
        self._call(self._producer.flush(), self._timeout * 2, "flush")

    def publish_queues(self, topic: str) -> list[MessageQueue]:
        return self._call(self._producer.publish_queues(topic), self._timeout, "publish_queues")


class SyncTransactionProducer(SyncProducer):
    """A blocking ``TransactionProducer``; keyword arguments go to it. Plain listener methods run
    in the loop's default executor, so they may block (a database transaction)."""

    def __init__(self, group: str, listener: TransactionListener, **kwargs: Any) -> None:
        super().__init__(group, listener=listener, **kwargs)

    def _new_producer(self, group: str, **kwargs: Any) -> Producer:
        return TransactionProducer(group, **kwargs)

    def __enter__(self) -> SyncTransactionProducer:
        self.start()
        return self

    def send_message_in_transaction(self, msg: Message, arg: Any = None, *,
                                    timeout: float = 60.0) -> TransactionSendResult:
        """Send the half message, run the local transaction, commit or roll back. ``timeout``
        bounds the wait, the local transaction included; past it ``MQClientError`` is raised and
        the broker's check-back decides the half message."""
        producer = self._producer
        assert isinstance(producer, TransactionProducer)
        return self._call(producer.send_message_in_transaction(msg, arg), timeout,
                          "send_message_in_transaction")


def _copy(src: asyncio.Future[T], dst: concurrent.futures.Future[T]) -> None:
    if not dst.set_running_or_notify_cancel():  # the caller cancelled it
        return
    if src.cancelled():
        dst.set_exception(MQClientError("the send was cancelled"))
    elif (exc := src.exception()) is not None:
        dst.set_exception(exc)
    else:
        dst.set_result(src.result())


class SyncPushConsumer(_LoopThread):
    """A blocking ``PushConsumer``; keyword arguments go to ``PushConsumer``. The listener is a
    plain function, run in a pool of ``consume_concurrency`` threads so it may block."""

    def __init__(self, group: str, **kwargs: Any) -> None:
        super().__init__(f"SyncPushConsumer({group})")
        try:
            self._consumer: PushConsumer = self._call_sync(lambda: PushConsumer(group, **kwargs), MARGIN,
                                                           "construct")
        except BaseException:
            self._stop()
            raise
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, self._consumer.consume_concurrency), thread_name_prefix=f"rocketlite-{group}")
        self._timeout = self._consumer.config.request_timeout + MARGIN
        self.shutdown_timeout = 10.0
        """How long ``shutdown()`` lets running handlers finish."""

    @property
    def consumer(self) -> PushConsumer:
        """The async consumer (use it only from coroutines run on the loop thread)."""
        return self._consumer

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._call_sync(lambda: self._consumer.subscribe(topic, expression), self._timeout, "subscribe")

    def register_listener(self, listener: SyncListener) -> None:
        """``listener(msgs)`` returns ConsumeStatus (OrderlyStatus for orderly); None is success."""
        executor = self._executor

        async def run(msgs: list[MessageExt]) -> ConsumeStatus | OrderlyStatus | None:
            return await asyncio.get_running_loop().run_in_executor(executor, listener, msgs)

        listen: Callable[[list[MessageExt]], Awaitable[ConsumeStatus | OrderlyStatus | None]] = run
        self._call_sync(lambda: self._consumer.register_listener(listen), self._timeout, "register_listener")

    def start(self) -> None:
        self._call(self._consumer.start(), 3 * self._timeout, "start")

    def shutdown(self) -> None:
        """Stop pulling, let running handlers finish (up to ``shutdown_timeout``), commit offsets,
        stop the loop thread. Handlers still running after that are left to finish on their own."""
        if self._closed:
            return
        try:
            self._call(self._consumer.shutdown(self.shutdown_timeout),
                       self.shutdown_timeout + 2 * self._timeout, "shutdown")
        finally:
            self._stop()
            self._executor.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> SyncPushConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class SyncSimpleConsumer(_LoopThread):
    """A blocking ``SimpleConsumer``; keyword arguments go to ``SimpleConsumer``. A receive may
    block up to ``await_duration`` plus the request timeout."""

    def __init__(self, group: str, **kwargs: Any) -> None:
        super().__init__(f"SyncSimpleConsumer({group})")
        try:
            self._consumer: SimpleConsumer = self._call_sync(lambda: SimpleConsumer(group, **kwargs),
                                                             MARGIN, "construct")
        except BaseException:
            self._stop()
            raise
        self._timeout = self._consumer.config.request_timeout + MARGIN

    @property
    def consumer(self) -> SimpleConsumer:
        """The async consumer (use it only from coroutines run on the loop thread)."""
        return self._consumer

    def subscribe(self, topic: str, expression: str = "*") -> None:
        self._call_sync(lambda: self._consumer.subscribe(topic, expression), self._timeout, "subscribe")

    def start(self) -> None:
        self._call(self._consumer.start(), 3 * self._timeout, "start")

    def close(self) -> None:
        """Leave the group, close the connections, stop the loop thread."""
        if self._closed:
            return
        try:
            self._call(self._consumer.close(), 2 * self._timeout, "close")
        finally:
            self._stop()

    def __enter__(self) -> SyncSimpleConsumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def receive(self, max_messages: int = 16,
                invisible_duration: Duration = dt.timedelta(seconds=30)) -> list[PopMessage]:
        budget = self._timeout + self._consumer.await_ms / 1000
        return self._call(self._consumer.receive(max_messages, invisible_duration), budget, "receive")

    def ack(self, msg: MessageExt) -> None:
        self._call(self._consumer.ack(msg), self._timeout, "ack")

    def ack_many(self, msgs: list[MessageExt]) -> None:
        self._call(self._consumer.ack_many(msgs), 2 * self._timeout, "ack_many")

    def change_invisible_duration(self, msg: MessageExt, duration: Duration) -> None:
        self._call(self._consumer.change_invisible_duration(msg, duration), self._timeout,
                   "change_invisible_duration")
