"""Every collaborator a broker builds, in dependency order, and what each one receives.

``build_components`` is the one place that constructs the replica manager and its helpers, the
request handlers and the coordinators; ``stop_components`` takes them down in reverse. The built
objects are kept in ``BrokerComponents``, a typed record (never a string-keyed lookup), so a reader
finds each object's type and its single construction site here.

Two dependency cycles are broken without attaching attributes after construction:

* the replica fetchers and the ISR manager read the replica manager lazily (they are built before it
  and handed to its constructor), as Kafka's ReplicaManager owns its fetcher and AlterPartition
  managers;
* the group and transaction coordinators need the replica manager to write their logs, and the
  replica manager must tell them about leadership changes: they subscribe through the typed
  ``LeadershipListener`` protocol when they are built.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.purgatory import Purgatory

if TYPE_CHECKING:
    from broker.alter_log_dirs import AlterLogDirsManager
    from broker.authorizer.api import Authorizer
    from broker.broker import Broker
    from broker.controller_glue import ControllerRequestState, ControllerServices
    from broker.group_coordinator import GroupCoordinator
    from broker.handlers_admin import AdminHandlers
    from broker.handlers_group import GroupHandlers
    from broker.isr_manager import IsrManager
    from broker.metrics import MetricsServer
    from broker.producer_ids import ProducerIdManager
    from broker.replica_fetcher import ReplicaFetcherManager
    from broker.replica_manager import ReplicaManager
    from broker.replication_quota import ReplicationQuota
    from broker.txn_coordinator import TransactionCoordinator
    from broker.txn_verification import TxnVerifier
    from controller.controller import KafkaController

log = logging.getLogger(__name__)

# Broker.zk_call: runs a blocking ZooKeeper call off the event loop.
ZkCall = Callable[..., Awaitable[Any]]


@dataclass
class BrokerComponents:
    """The objects one broker built; None until built (or after being stopped)."""

    metadata_waiters: Purgatory = field(default_factory=lambda: Purgatory("Metadata"))
    follower_quota: ReplicationQuota | None = None
    replica_fetchers: ReplicaFetcherManager | None = None
    log_dir_mover: AlterLogDirsManager | None = None  # AlterReplicaLogDirs moves
    isr_manager: IsrManager | None = None
    controller_requests: ControllerRequestState | None = None
    admin: AdminHandlers | None = None
    producer_ids: ProducerIdManager | None = None
    group_coordinator: GroupCoordinator | None = None
    groups: GroupHandlers | None = None
    txn_coordinator: TransactionCoordinator | None = None
    txn_verifier: TxnVerifier | None = None  # KIP-890: leaders ask the coordinator before transactional appends
    controller_services: ControllerServices | None = None
    metrics: MetricsServer | None = None
    authorizer: Authorizer | None = None  # None: authorizer.class.name is empty (everything allowed)

    @property
    def controller(self) -> KafkaController | None:
        """This broker's KafkaController (active or not); None before start and after stop."""
        return self.controller_services.controller if self.controller_services is not None else None


async def build_components(broker: Broker) -> ReplicaManager:
    """Build the replica manager (returned: the broker keeps it) and register every handler."""
    from broker.alter_log_dirs import AlterLogDirsManager
    from broker.controller_glue import ControllerApis, ControllerRequestState, ControllerServices
    from broker.handlers_admin import AdminHandlers
    from broker.handlers_cluster import ClusterHandlers
    from broker.handlers_data import DataApis
    from broker.handlers_group import GroupHandlers, register_group_apis, start_group_coordinator
    from broker.handlers_log_dirs import LogDirHandlers
    from broker.handlers_security import SecurityHandlers, scram_alterations_only_on_the_controller
    from broker.handlers_txn import TxnApis
    from broker.isr_manager import IsrManager
    from broker.producer_ids import ProducerIdManager
    from broker.replica_fetcher import ReplicaFetcherManager
    from broker.replica_manager import ReplicaManager
    from broker.replication_quota import ReplicationQuota
    from broker.security.inter_broker import inter_broker_security
    from broker.txn_broker_side import start_transaction_coordinator
    from broker.txn_markers import TxnMarkerWriter
    from broker.txn_verification import TxnVerifier

    c = broker.components
    assert broker.log_manager is not None and broker.zk is not None
    from broker.authorizer.acl_authorizer import create_authorizer
    from broker.authorizer.zk_acl_store import ZkAclStore
    from broker.handlers_acls import AclHandlers

    acl_authorizer = create_authorizer(broker.config, ZkAclStore(broker.zk), broker.zk_call)
    if acl_authorizer is not None:
        await acl_authorizer.start(asyncio.get_running_loop())
    c.authorizer = acl_authorizer
    from broker.request_authorization import RequestAuthorizer, authorize_quota_and_scram_apis

    auth = RequestAuthorizer(acl_authorizer)  # every handler asks through it (Kafka's AuthHelper)
    AclHandlers(acl_authorizer).register(broker.apis)
    # Replication throttles; rates are dynamic broker configs, so read through broker.config each time.
    leader_quota = ReplicationQuota(
        broker.broker_id, "leader.replication.throttled.rate", "leader_replication_throttled_replicas",
        lambda name: broker.config.get(name), broker.topic_config)
    c.follower_quota = ReplicationQuota(
        broker.broker_id, "follower.replication.throttled.rate", "follower_replication_throttled_replicas",
        lambda name: broker.config.get(name), broker.topic_config)
    c.replica_fetchers = ReplicaFetcherManager(broker.broker_id, broker.metadata, broker.inter_broker_listener,
                                               lambda: broker.config, lambda: broker.replica_manager, c.follower_quota)
    c.isr_manager = IsrManager(broker.broker_id, broker.zk, broker.controller_listener, lambda: broker.broker_epoch,
                               lambda: broker.config, lambda: broker.replica_manager)
    c.log_dir_mover = AlterLogDirsManager(broker.broker_id, broker.log_manager, lambda: broker.replica_manager,
                                          lambda: broker.config, lambda: broker.cleaner)
    rm = ReplicaManager(broker.broker_id, broker.config, broker.log_manager, broker.metadata, broker.topic_config,
                        isr_manager=c.isr_manager, leader_quota=leader_quota, fetcher_manager=c.replica_fetchers,
                        log_dir_mover=c.log_dir_mover, load_topic_configs=broker.load_topic_overrides)
    broker.replica_manager = rm
    await c.isr_manager.start()
    c.log_dir_mover.start()
    c.txn_verifier = TxnVerifier(broker.broker_id, broker.metadata, broker.inter_broker_listener,
                                 lambda: c.txn_coordinator, broker.config.get("request.timeout.ms"),
                                 inter_broker_security(broker.config, broker.inter_broker_listener))
    DataApis(rm, auth, verifier=c.txn_verifier).register(broker.apis)
    assert broker.zk is not None
    c.controller_requests = ControllerRequestState(lambda: broker.broker_epoch, broker.zk, broker.zk_call)
    ControllerApis(c.controller_requests, rm, broker.metadata, c.metadata_waiters,
                   lambda: c.controller, auth).register(broker.apis)
    # Started by the broker once registered in ZooKeeper (the controller needs our broker epoch).
    c.controller_services = ControllerServices(broker.zk, broker.broker_id, lambda: broker.config,
                                               broker.controller_listener, lambda: broker.broker_epoch)
    c.admin = AdminHandlers(broker.zk, broker.zk_call, broker.broker_id, broker.metadata, broker, c.metadata_waiters,
                            lambda: c.controller, auth)
    c.admin.register(broker.apis)
    LogDirHandlers(broker.log_manager, rm, c.log_dir_mover, auth).register(broker.apis)
    ClusterHandlers(broker.broker_id, broker.metadata, lambda: c.controller, auth).register(broker.apis)
    from broker.delegation_tokens import start_delegation_tokens

    SecurityHandlers(broker.zk, broker.zk_call, await start_delegation_tokens(broker), auth).register(broker.apis)
    authorize_quota_and_scram_apis(broker.apis, auth)
    scram_alterations_only_on_the_controller(broker.apis, lambda: c.controller)
    c.producer_ids = ProducerIdManager(broker.zk, broker.broker_id, broker.zk_call)
    markers = TxnMarkerWriter(rm, lambda: broker.config, lambda: c.group_coordinator)
    TxnApis(c.producer_ids, broker.metadata, rm, markers, lambda: c.txn_coordinator,
            lambda: c.group_coordinator, auth).register(broker.apis)
    c.group_coordinator = await start_group_coordinator(lambda: broker.config, broker.broker_id, broker.metadata, rm)
    assert c.admin is not None
    c.groups = GroupHandlers(c.group_coordinator, rm, broker.metadata, lambda: broker.config, c.admin.create_topic,
                             lambda: c.txn_coordinator, auth, verifier=c.txn_verifier)
    rm.add_leadership_listener(c.groups)
    register_group_apis(broker.apis, c.groups)
    c.txn_coordinator = await start_transaction_coordinator(broker.config, broker.broker_id, broker.metadata, rm,
                                                            c.producer_ids, markers, broker.inter_broker_listener)
    return rm


async def stop_components(broker: Broker) -> None:
    from broker.txn_broker_side import stop_transaction_coordinator

    c = broker.components
    authorizer, c.authorizer = c.authorizer, None
    close_authorizer = getattr(authorizer, "close", None)
    if close_authorizer is not None:
        await close_authorizer()  # stops following ACL change notifications
    mover, c.log_dir_mover = c.log_dir_mover, None
    if mover is not None:
        await mover.shutdown()  # before the logs close; moves resume after the restart
    fetchers, c.replica_fetchers = c.replica_fetchers, None
    if fetchers is not None:
        await fetchers.shutdown()
    isr, c.isr_manager = c.isr_manager, None
    if isr is not None:
        await isr.stop()
    verifier, c.txn_verifier = c.txn_verifier, None
    if verifier is not None:
        verifier.close()  # waiting produce requests are answered NETWORK_EXCEPTION
    txn, c.txn_coordinator = c.txn_coordinator, None
    try:
        if txn is not None:
            await stop_transaction_coordinator(txn)
    except Exception:
        log.exception("stopping the transaction coordinator failed")
    coordinator, c.group_coordinator = c.group_coordinator, None
    if coordinator is not None:
        try:
            await coordinator.close()
        except Exception:
            log.exception("stopping the group coordinator failed")
