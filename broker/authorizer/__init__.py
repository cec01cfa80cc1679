"""Authorization: Kafka's Authorizer interface and its ZooKeeper ACL implementation (AclAuthorizer)."""
