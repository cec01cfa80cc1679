"""Authorization: Kafka's Authorizer interface and its ZooKeeper ACL implementation (AclAuthorizer).

- api.py: the interface and Kafka's resource, operation and permission types;
- acls.py: ACL bindings and filters with Kafka's matching rules;
- acl_cache.py: the in-memory index decisions come from;
- zk_acl_store.py: ACL znodes and change notifications, Kafka's layout;
- acl_authorizer.py: the authorizer (decisions, ACL updates, following other brokers' changes);
- operations.py: ``authorized_operations``, the KIP-430 bit field;
- context.py: ``request_context(conn, request)``, the authorizer's view of a request.
"""

from broker.authorizer.operations import authorized_operations

__all__ = ["authorized_operations"]
