"""Integration tests: stock clients over real sockets against real broker processes and a real ZooKeeper.

How they run. ``tests/conftest.py`` starts one ``clients.devcluster.LocalCluster`` per session (the
``kafka_cluster`` fixture): a private ZooKeeper from Debian's package and one broker, each a real
subprocess with its own directory and log file. Tests that only talk to the broker share it and keep
out of each other's way with names of their own (``helpers.unique``). Tests that stop, kill or restart
brokers build their own cluster with ``cluster_factory``. kafka-python, confluent-kafka (librdkafka)
and kcat connect to the broker as any user would; ``helpers.RawClient`` sends hand-made requests
(encoded with our ``protocol`` package) where a test needs bytes no client would send. A failing test
gets the end of its brokers' logs in its report. Group tests run with 6 s session timeouts and
``group.initial.rebalance.delay.ms=0`` so that the suite stays within a few minutes on two cores.
The system tools (ZooKeeper, kcat, strace) come from ``deploy/install-sysdeps.sh``.
"""
