"""Controller constants shared by the controller and the modules it delegates to.

The configs the controller reads are not declared here: ``KafkaController.config(name)`` reads the
broker's value through the registry (``config/``), which holds every default.
"""

from __future__ import annotations

ELECTION_PREFERRED = 0
ELECTION_UNCLEAN = 1
