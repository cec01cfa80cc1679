"""Which quota applies to a client: Kafka's DefaultQuotaCallback (inside ClientQuotaManager).

Quotas are configured per entity: a user, a client id, or both, each possibly ``<default>``. For a
request from user U with client id C the most specific configured entity wins, in this order:

    /config/users/U/clients/C
    /config/users/U/clients/<default>
    /config/users/U
    /config/users/<default>/clients/C
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/C
    /config/clients/<default>

Clients are measured together when they resolve to the same *metric tags*: with only client-id quotas
configured the tags are ("", C), so every user of client id C shares C's quota; with only user quotas
they are (U, ""); with several levels in use the tags follow the precedence above. The quota limit is
then looked up from the tags, as Kafka does.

Users are keyed by their sanitized name (as in ZooKeeper and in Kafka's metric tags), client ids by
their plain value. ``DEFAULT`` stands for ``<default>``; it is an object of its own, so a client that
really calls itself "<default>" is not taken for the default entity.
"""

from __future__ import annotations

from typing import Final


class _DefaultEntity:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<default>"


DEFAULT: Final = _DefaultEntity()

UserKey = str | _DefaultEntity | None  # sanitized user name, DEFAULT, or None: not part of the entity
ClientKey = str | _DefaultEntity | None  # client id, DEFAULT, or None
EntityKey = tuple[UserKey, ClientKey]
MetricTags = tuple[str, str]  # (sanitized user, client id); "" where the quota does not depend on it

# Kafka's QuotaTypes bits: which entity levels have ever had a quota of this type (until restart).
CLIENT_ID_LEVEL = 1
USER_LEVEL = 2
USER_CLIENT_ID_LEVEL = 4


class QuotaOverrides:
    """The configured values of one quota type and the metric tags / limit resolution over them."""

    def __init__(self) -> None:
        self.values: dict[EntityKey, float] = {}
        self.levels = 0

    def update(self, user: UserKey, client: ClientKey, value: float | None) -> None:
        """Set (or with None remove) the quota of an entity.

        A level counts as in use from its first quota on, even once removed again (Kafka keeps it
        until restart). Kafka also marks a level in use when a config without this quota type is
        written for it (a SCRAM credential, another quota type); that changes no limit, only whether
        clients are measured, so here a level is marked only by a quota of this type.
        """
        key = (user, client)
        if value is None:
            self.values.pop(key, None)
            return
        self.values[key] = value
        if user is not None:
            self.levels |= USER_CLIENT_ID_LEVEL if client is not None else USER_LEVEL
        elif client is not None:
            self.levels |= CLIENT_ID_LEVEL

    def metric_tags(self, user: str, client_id: str) -> MetricTags:
        levels = self.levels
        if levels in (0, CLIENT_ID_LEVEL):
            return "", client_id
        if levels == USER_LEVEL:
            return user, ""
        if levels == USER_CLIENT_ID_LEVEL:
            return user, client_id
        values = self.values
        if ((user, client_id) in values or (user, DEFAULT) in values):
            return user, client_id
        if (user, None) in values:
            return user, ""
        if (DEFAULT, client_id) in values or (DEFAULT, DEFAULT) in values:
            return user, client_id
        if (DEFAULT, None) in values:
            return user, ""
        return "", client_id

    def limit(self, tags: MetricTags) -> float | None:
        """The quota for clients measured under ``tags``; None: no quota."""
        user, client_id = tags
        get = self.values.get
        if user and client_id:
            for key in ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT)):
                quota = get(key)
                if quota is not None:
                    return quota
            return None
        if user:
            quota = get((user, None))
            return quota if quota is not None else get((DEFAULT, None))
        if client_id:
            quota = get((None, client_id))
            return quota if quota is not None else get((None, DEFAULT))
        return None
