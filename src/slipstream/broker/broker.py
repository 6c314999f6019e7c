"""The broker: wires storage, topics, the group coordinator and the server together.

Usable embedded (``async with Broker(storage="memory", port=0) as b``, or the
blocking ``with Broker(...)`` that runs its own loop in a thread) and from the CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
import threading
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ..log.api import LogFenced
from ..log.metadata import DirectoryMetadata, MetadataStore
from .config import BrokerConfig
from .connection_limits import ConnectionLimits
from .dispatch import Dispatcher
from .gc_tuning import FREEZE_AFTER_S, ServingGC
from .group_configs import GroupConfigs
from .handlers import all_handlers
from .listener_settings import ListenerSecurity
from .listeners import Listener, advertised_endpoint, parse_advertised, parse_listeners
from .producer_ids import ProducerIdAllocator
from .security.acl_store import AclStore
from .security.authorizer import Authorizer, parse_super_users
from .security.credentials import CredentialStore
from .security.session import ConnectionSession
from .security.tls import server_context, subject_name
from .server import KafkaConnection
from .state import BrokerState, load_cluster_id
from .topics import OFFSETS_TOPIC, TopicManager

if TYPE_CHECKING:
    from .admin.listener import AdminListener
    from .cleaner import LogCleaner
    from .cluster.member import ClusterMember
    from .groups import GroupCoordinatorAdapter
    from .transactions import TransactionCoordinatorAdapter

log = logging.getLogger(__name__)

# Most of the broker's code: the group and transaction coordinators (and what they
# import) and the log cleaner. Not imported with this module: a start imports them in a
# worker thread while its listener answers ApiVersions and Metadata (Dispatcher).
# `slipstream.Broker` and the pytest plugin import them up front (load_all_modules).
COORDINATOR_MODULES = tuple(f"{__package__}.{name}" for name in ("groups", "transactions", "cleaner"))


# The produce and fetch path, imported where first used (BrokerState names it for types
# only): the same worker thread imports it after the coordinators, so a first Produce or
# Fetch finds it loaded. (Their handlers and declarations still load at their first request.)
SERVING_PATH_MODULES = tuple(
    f"{__package__}.{name}" for name in ("appends", "append_policy", "producer_state", "fetch_sessions")
)


def load_coordinator_modules() -> None:
    """Import COORDINATOR_MODULES, then SERVING_PATH_MODULES (once; later calls find them
    loaded)."""
    for name in COORDINATOR_MODULES + SERVING_PATH_MODULES:
        importlib.import_module(name)


def coordinator_modules_loaded() -> bool:
    return all(name in sys.modules for name in COORDINATOR_MODULES)


def load_all_modules() -> None:
    """Import all a broker may run: the coordinator modules and every API's handler. For
    embedded use (`slipstream.Broker`, the pytest plugin): a start and the first requests
    then import nothing, as when this module still imported it all."""
    load_coordinator_modules()
    all_handlers()
    importlib.import_module("slipstream.log.memory")  # the embedded broker's default store


class Broker:
    def __init__(self, config: BrokerConfig | None = None, **settings: Any) -> None:
        base = config or BrokerConfig()
        self.config = replace(base, **settings).validate() if settings else base.validate()
        self.state: BrokerState | None = None
        self.groups: GroupCoordinatorAdapter | None = None
        self.transactions: TransactionCoordinatorAdapter | None = None
        self._server: asyncio.Server | None = None
        self._servers: list[asyncio.Server] = []
        # Listener name -> bound port, and "host:port" it listens on.
        self.ports: dict[str, int] = {}
        self.listener_addresses: dict[str, str] = {}
        self._connections: set[KafkaConnection] = set()
        self._tasks: list[asyncio.Task[None]] = []
        self._thread: threading.Thread | None = None
        self._thread_loop: asyncio.AbstractEventLoop | None = None
        self.cleaner: LogCleaner | None = None
        self.port = self.config.port
        self.admin: AdminListener | None = None
        self._limits: ConnectionLimits | None = None
        self.cluster: ClusterMember | None = None

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> Broker:
        config = self.config
        data_dir: str | None = None
        metadata: MetadataStore | None = None
        if config.storage == "disk":
            from ..log.disk.store import DiskLogStore

            # (os.path, not pathlib: a start that opens no partition before it answers
            # need not import pathlib.)
            data_dir = os.path.normpath(config.data_dir)
            os.makedirs(data_dir, exist_ok=True)
            store: Any = DiskLogStore(os.path.join(data_dir, "logs"))
            metadata = DirectoryMetadata(data_dir)
        elif config.storage == "postgres":
            from ..log.postgres import PostgresLogStore

            assert config.database_url is not None  # validate() checked
            # Connecting and migrating block: do it off the loop.
            store = await asyncio.get_running_loop().run_in_executor(
                None, partial(PostgresLogStore, config.database_url, node_id=config.node_id, lazy=True)
            )
            metadata = store.metadata()
        else:
            from ..log.memory import MemoryLogStore

            store = MemoryLogStore()
        topics = TopicManager(config, store, metadata)
        # A disk broker recovers __consumer_offsets (50 partitions) in a worker thread while
        # its listener answers; the group coordinator is loading until then anyway.
        topics.load(defer=(OFFSETS_TOPIC,) if config.storage == "disk" else ())
        group_configs = GroupConfigs(config, metadata)
        group_configs.load()
        state = BrokerState(
            config=config,
            topics=topics,
            cluster_id=load_cluster_id(metadata),
            producer_ids=ProducerIdAllocator(
                metadata, store.reserve_producer_ids if config.storage == "postgres" else None
            ),
            group_configs=group_configs,
        )
        if config.uses_acl_authorizer:
            state.acl_store = AclStore(metadata)
            state.authorizer = Authorizer(
                parse_super_users(config.super_users),
                config.allow_everyone_if_no_acl_found,
                state.acl_store.load(),
            )
        self.state = state
        if config.storage == "postgres":
            # A broker over PostgreSQL is a cluster member (alone or not): it serves only
            # the partitions whose lease it holds.
            from .cluster.view import ClusterView  # (loads the cluster side only when used)

            state.cluster = ClusterView(config.node_id)
        # Answers ApiVersions and Metadata until the coordinators are attached.
        dispatcher = Dispatcher(state)
        # Up before the Kafka listener, so probes see the broker from its first moment.
        if config.admin_port is not None:
            # It shows the group coordinator: loaded first here.
            groups = await self._start_coordinators(state, dispatcher)
            # Imported only when switched on: a broker without it never loads prometheus_client.
            from .admin.listener import AdminListener

            self.admin = AdminListener(state, groups.coordinator, lambda: len(self._connections), groups)
            await self.admin.start(config.admin_host or config.host, config.admin_port)
        limits = ConnectionLimits(
            config.max_connections, config.max_connections_per_ip, config.connections_max_idle_ms, lambda: state.clock()
        )
        self._limits = limits
        await self._open_listeners(state, dispatcher, metadata)
        # The listener answers while the coordinators load and a worker thread makes a
        # missing __consumer_offsets; start() still returns with both done, as embedded
        # users expect.
        try:
            groups = self.groups or await self._start_coordinators(state, dispatcher)
            transactions = self.transactions
            assert transactions is not None
            await groups.offsets_topic_ready()
        except BaseException:
            await self.stop()  # the listeners are open already
            raise
        if state.cluster is not None:
            from .cluster.member import ClusterMember  # (loads the postgres side only when used)

            assert config.database_url is not None
            await groups.loaded()  # every offsets partition disowned until its lease is held
            self.cluster = ClusterMember(state, store, config.database_url, state.cluster)
            # (__transaction_state partitions are loaded as their leases are gained.)
            await self.cluster.start(groups, transactions)
            for server in self._servers:
                await server.start_serving()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._retention_loop()))
        self._tasks.append(loop.create_task(limits.sweep_idle(self._connections)))
        from .cleaner import LogCleaner  # (loaded with the coordinators)

        self.cleaner = LogCleaner(
            topics,
            state.clock,
            backoff_ms=config.log_cleaner_backoff_ms,
            last_stable_offset=state.last_stable_offset,
        )
        self._tasks.append(loop.create_task(self.cleaner.run()))
        if config.durability == "interval" or config.storage == "postgres":
            # postgres: acks=0/1 appends reach the database within flush_interval_ms.
            self._tasks.append(loop.create_task(self._flush_loop()))
        log.info(
            "slipstream broker listening on %s (storage=%s, data=%s)",
            ", ".join(f"{n}://{self.listener_addresses[n]}" for n in self.ports),
            config.storage,
            data_dir if config.storage != "postgres" else _redacted(config.database_url or ""),
        )
        return self

    async def _start_coordinators(self, state: BrokerState, dispatcher: Dispatcher) -> GroupCoordinatorAdapter:
        """Make and start the group and transaction coordinators and hand them to the
        dispatcher; their modules are imported by a worker thread the first time, so an
        open listener goes on answering meanwhile."""
        if not coordinator_modules_loaded():
            await asyncio.get_running_loop().run_in_executor(None, load_coordinator_modules)
        from .groups import GroupCoordinatorAdapter
        from .transactions import TransactionCoordinatorAdapter

        groups = GroupCoordinatorAdapter(state)
        self.groups = groups
        # Loading from here (group requests wait or answer COORDINATOR_LOAD_IN_PROGRESS);
        # __consumer_offsets is made if missing and replayed in the background.
        await groups.start()
        transactions = TransactionCoordinatorAdapter(state, groups)
        self.transactions = transactions
        await transactions.start(load=state.cluster is None)
        dispatcher.attach_coordinators(groups, transactions)
        return groups

    async def _open_listeners(
        self, state: BrokerState, dispatcher: Dispatcher, metadata: MetadataStore | None
    ) -> None:
        """Credentials, then one server per listener, each with its TLS context and sessions."""
        config = self.config
        credentials = CredentialStore(metadata)
        credentials.load()
        listeners = parse_listeners(config.listeners, config.listener_security_protocol_map, config.host, config.port)
        enabled = {m for lst in listeners for m in config.listener_security(lst).mechanisms}
        scram = sorted(m for m in enabled if m.startswith("SCRAM-"))
        if config.scram_bootstrap_users:
            credentials.bootstrap(config.scram_bootstrap_users, scram or ["SCRAM-SHA-512"])
        state.credentials = credentials
        advertised = parse_advertised(config.advertised_listeners, listeners)
        loop = asyncio.get_running_loop()
        for index, listener in enumerate(listeners):
            tls = None
            own = config.listener_security(listener)
            if listener.uses_tls:
                tls = server_context(own.certfile, own.keyfile, own.cafile, own.client_auth, own.key_password)
            server = await loop.create_server(
                partial(self._new_connection, dispatcher, listener, own, credentials),
                host=listener.host,
                port=listener.port,
                reuse_address=True,
                ssl=tls,
                # A cluster member first takes its leases (it needs its bound port for that).
                start_serving=state.cluster is None,
            )
            port = server.sockets[0].getsockname()[1]
            self._servers.append(server)
            self.ports[listener.name] = port
            self.listener_addresses[listener.name] = f"{listener.host}:{port}"
            state.advertised[listener.name] = advertised_endpoint(
                listener, port, advertised, config.advertised_host, config.advertised_port, primary=index == 0
            )
        self._server = self._servers[0]
        self.port = self.ports[listeners[0].name]
        state.advertised_host, state.advertised_port = state.advertised[listeners[0].name]

    def _new_connection(
        self, dispatcher: Dispatcher, listener: Listener, own: ListenerSecurity, credentials: CredentialStore
    ) -> KafkaConnection:
        state = self.state
        assert state is not None

        def session(transport: asyncio.BaseTransport) -> ConnectionSession:
            cert = transport.get_extra_info("peercert") if listener.uses_tls else None
            return ConnectionSession(
                listener, credentials, own.mechanisms, subject_name(cert) if cert else None,
                max_reauth_ms=own.max_reauth_ms, clock=lambda: state.clock(),
            )

        return KafkaConnection(
            dispatcher, self.config.socket_request_max_bytes, self._connections, self._limits, session_factory=session
        )

    def bootstrap_for(self, listener: str) -> str:
        """host:port to give a client of this listener (its advertised endpoint)."""
        assert self.state is not None, "the broker is not started"
        host, port = self.state.advertised[listener.upper()]
        return f"{host}:{port}"

    async def stop(self) -> None:
        if self.admin is not None:
            await self.admin.stop()
            self.admin = None
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self.cluster is not None:
            await self.cluster.stop()  # hand the leases over before the data path closes
            self.cluster = None
        if self.cleaner is not None:
            self.cleaner.close()
            self.cleaner = None
        if self._server is not None:
            for server in self._servers:
                server.close()
            workers = [c.worker for c in self._connections if c.worker is not None]
            for conn in list(self._connections):
                conn.close(None)
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            for server in self._servers:
                await server.wait_closed()
            self._servers.clear()
            self._server = None
        if self.state is not None:
            if self.transactions is not None:
                await self.transactions.stop()
                self.transactions = None
            if self.groups is not None:
                await self.groups.stop()
                self.groups = None
            try:
                self.state.topics.flush_all()
                self.state.topics.close()
            except LogFenced as exc:  # unacknowledged writes of a lost lease
                log.warning("closing the log store: %s", exc)
            self.state = None

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        assert self._server is not None
        # The CLI's broker owns its process: tune the collector for serving (see gc_tuning);
        # the full pass before the freeze waits until the first requests are answered.
        tuning = ServingGC()
        tuning.apply(freeze=False)
        freeze = asyncio.get_running_loop().call_later(FREEZE_AFTER_S, _settle_start_up, tuning)
        try:
            await self._server.serve_forever()
        finally:
            freeze.cancel()
            tuning.restore()
            await self.stop()

    @property
    def admin_url(self) -> str | None:
        """The admin listener's base URL, or None when it is off."""
        if self.admin is None:
            return None
        return f"http://{self.config.admin_host or self.config.host}:{self.admin.port}"

    @property
    def bootstrap_servers(self) -> str:
        """host:port of the first listener (the only one by default)."""
        if self.state is not None and self.state.advertised:
            return f"{self.state.advertised_host}:{self.state.advertised_port}"
        host = self.config.advertised_host or self.config.host
        return f"{host}:{self.port}"

    async def __aenter__(self) -> Broker:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # Blocking form: the broker runs on its own loop in a daemon thread.
    def __enter__(self) -> Broker:
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._thread_loop = loop
            try:
                loop.run_until_complete(self.start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="slipstream-broker", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            raise failure[0]
        return self

    def __exit__(self, *exc: object) -> None:
        if self._thread_loop is not None and self._thread is not None:
            self._thread_loop.call_soon_threadsafe(self._thread_loop.stop)
            self._thread.join(timeout=10)
            self._thread = None

    # ---------------------------------------------------------------- background

    async def _retention_loop(self) -> None:
        interval = self.config.log_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if self.state is not None:
                try:
                    self.state.topics.enforce_retention(self.state.clock())
                except Exception:
                    log.exception("retention check failed")

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.config.flush_interval_ms / 1000)
            if self.state is not None:
                await loop.run_in_executor(None, self.state.topics.flush_all)
                if self.state is not None and self.state.cluster is not None:
                    # Reads stop at the committed end: fetches waiting on acks=0/1 writes
                    # see them now.
                    for key in list(self.state.cluster.held):
                        self.state.notifier.notify(key)


def _redacted(url: str) -> str:
    """The database URL without its password, for logs."""
    scheme, sep, rest = url.partition("://")
    credentials, at, location = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{location}"


def _settle_start_up(tuning: ServingGC) -> None:
    """A second after the listener opened: load what the first produce would otherwise load
    (the CRC module), then collect and freeze the start-up heap with it in."""
    from ..protocol.record_batch import load_crc32c

    load_crc32c()
    tuning.freeze_start_up_heap()
